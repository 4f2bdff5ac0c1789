#pragma once
// Where a gpu step's time goes, node by node, from CUDA events (issue 36). With
// TPUSIM_GPU_PROFILE=FILE set, the gpu backend records an event on the stream before and after
// each node's work; once a step's outputs are read back (the step has finished on the device),
// each pair's elapsed time is added to its node. FILE is rewritten after every device loop with
// the totals so far: the nodes by time, then the time by op.
//
// An event pair measures the stream from the node's first queued work to its last, so a node
// whose kernels the host queues more slowly than the GPU runs them is charged the gaps too:
// the per-node times add up to the step's time on the device, host launch overhead included.
// Recording costs two cudaEventRecord calls a node (about a microsecond each on the host).

#include <memory>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <cuda_runtime_api.h>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::gpu {

class NodeProfile {
 public:
  // A profile of `graph`'s nodes written to $TPUSIM_GPU_PROFILE, or null when it is unset.
  static std::unique_ptr<NodeProfile> from_environment(const Graph& graph);
  ~NodeProfile();
  NodeProfile(const NodeProfile&) = delete;
  NodeProfile& operator=(const NodeProfile&) = delete;

  // Event records around node `id`'s work in the current step.
  absl::Status before(int id);
  absl::Status after(int id);
  // The step's elapsed times, added in once the step's work has finished (the caller has
  // synchronised); counts one step.
  absl::Status add_step();
  // Rewrites the file with the table (table()).
  absl::Status write() const;
  // The totals as text: ms a step for each node that ran, slowest first, then by op.
  std::string table() const;

 private:
  NodeProfile(const Graph& graph, std::string path);
  const Graph& graph_;
  std::string path_;
  std::vector<cudaEvent_t> start_, stop_;  // per node, made on first use
  std::vector<bool> recorded_;             // this step
  std::vector<bool> ran_;                  // in any step
  std::vector<double> total_ms_;           // per node, over every step
  int64_t steps_ = 0;
};

}  // namespace tpusim::runtime::gpu
