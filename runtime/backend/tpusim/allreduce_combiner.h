#pragma once
// XLA's AllReduceCombiner for the tpusim compiler: a step's cross_replica_sums grouped into
// combined all-reduces (ISA Collective.parts), so that the gradients of a model's many small
// tensors share one collective's latency instead of each paying its own, as XLA combines the
// all-reduces CrossShardOptimizer emits before it schedules them.
//
// The sums are taken in the order the compiler would emit them (schedule.h; with
// StepOptions::overlap_allreduce, the order their inputs are computed in, the backward pass's;
// without, their own place, the infeeds' before anything else either way), and each
// joins the group before it while the group's f32 bytes stay within the threshold and its count
// within the count limit. A group's combined all-reduce runs where its last member would have:
// after its last input is computed, so a big threshold trades the latencies it saves for the
// overlap it loses (the earlier members wait for the later ones). A sum joins no group whose
// member's result is read, directly or not, before the sum would run: the combined collective
// could never start. Nor does a sum of another sum's result, or a sum another sum reads.

#include <cstdint>
#include <vector>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

struct CombineLimits {
  uint64_t threshold_bytes = 0;  // the most f32 bytes one combined all-reduce carries; 0: none
  uint32_t max_count = 256;      // the most sums one combines
};

class CombinedAllReduces {
 public:
  CombinedAllReduces() = default;
  // Groups the cross_replica_sums `needed` marks (every node when empty), whose emission order
  // puts each after its input (`hoisted`) or keeps graph order.
  // `computed_with`: nodes emitted with a later one (schedule.h, emission_order).
  CombinedAllReduces(const Graph& graph, const std::vector<bool>& needed, bool hoisted,
                     const CombineLimits& limits, const std::vector<int>& computed_with = {});

  // The sum whose fragment emits the group `id` belongs to (its last member), -1 when `id` is in
  // no group of two or more.
  int root(int id) const { return root_.empty() ? -1 : root_[static_cast<size_t>(id)]; }
  // The members of the group whose root is `root`, in order, the root last; {root} when alone.
  std::vector<int> members(int root) const;
  // How many all-reduces the groups make of how many sums.
  uint32_t groups() const { return groups_; }
  uint32_t sums() const { return sums_; }

 private:
  std::vector<int> root_;                  // per node
  std::vector<std::vector<int>> members_;  // per node: filled for roots only
  uint32_t groups_ = 0, sums_ = 0;
};

}  // namespace tpusim::runtime::tpusim_backend
