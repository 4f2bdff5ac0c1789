#pragma once
// The tpusim compiler's planning passes (compiler.h runs them, then emits): what every node of a
// step becomes before any instruction is written. In order:
//
//   1. fusion     which convolutions and max pools fuse (lowering.h, Fusion), then which
//                 elementwise nodes group, which broadcasts fold, which producers are
//                 recomputed and which sibling reductions share a fragment (fusion_plan.h);
//   2. absorbed   the nodes computed inside another node's fragment;
//   3. combining  the cross_replica_sums XLA would combine (allreduce_combiner.h);
//   4. order      the order fragments are emitted in (schedule.h);
//   5. buffers    which nodes have an HBM buffer and which buffers each fragment reads and
//                 writes, as the lowerings declare them (buffer_uses.h);
//   6. memory     the liveness-based HBM plan in the core's share of its chip (hbm_plan.h).
//
// Each pass reads only what the ones before it decided, so a fusion decision can be tested on a
// graph without emitting anything.

#include <cstdint>
#include <vector>

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "runtime/backend/tpusim/allreduce_combiner.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/hbm_plan.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

// What the passes decided for one node.
struct NodePlan {
  bool needed = false;  // some fragment, output or update reads its value
  int group = -1;       // the root of the elementwise group computing it; -1: none
  // Computed inside another node's fragment, with no fragment of its own: a fused convolution's
  // patches, a folded broadcast, a recomputed producer.
  bool absorbed = false;
  bool materialized = true;  // its value has an HBM buffer
  // The buffers the fragment this node emits reads: a group's root reads its members' outside
  // inputs, a combined all-reduce's root every member's input. Empty for nodes emitting nothing.
  std::vector<int> reads;
  // The buffers it writes: its own, a fused convolution's kept patches, a combined all-reduce
  // root's every member's result. A group's other members have none: they stay in VMEM.
  std::vector<int> writes;
};

struct StepPlan {
  Fusions fusions;    // pass 1: the fused convolutions and pools, by the node emitting each
  FusionPlan fusion;  // pass 1: groups, folded broadcasts, recomputed producers
  std::vector<NodePlan> nodes;  // per graph node
  CombinedAllReduces combined;  // pass 3
  bool overlapped = false;      // the all-reduces run beside later fragments
  std::vector<int> order;       // pass 4: every node, in emission order
  PlanRequest request;          // pass 6's input
  HbmPlan hbm;                  // pass 6
  uint64_t hbm_base = 0;        // where the core's share of its chip's HBM starts
  uint64_t hbm_share = 0;       // that share's bytes, as the device holds tensors
  uint64_t hbm_span = 0;        // the simulator's room for them (sim::HbmShare::span)

  const NodePlan& node(int id) const { return nodes[static_cast<size_t>(id)]; }
  // Whether node `id` emits a fragment: needed, not absorbed, not a non-root member of an
  // elementwise group or a combined all-reduce.
  bool emits(int id) const;
};

// HBM after a core's planned tensors kept for the compiler's own constants (iota rows, masks).
inline constexpr uint64_t kConstantsRegion = 64ull << 20;

// Runs the planning passes on `graph` for global core `core`. ResourceExhausted when the step's
// tensors at their peak and the constants region do not fit the core's share of HBM, naming the
// largest tensor; then the plan that did not fit goes to `refused` when given (what the
// rematerialization at the peak works from: rematerialize.h). `temporaries`, when not empty,
// are the nodes' scratch bytes (PlanRequest::temporaries) as an emission of this graph needed
// them.
absl::StatusOr<StepPlan> plan_step(const Graph& graph, const config::SliceSpec& slice,
                                   uint32_t core, const StepOptions& options,
                                   StepPlan* refused = nullptr,
                                   const std::vector<uint64_t>& temporaries = {});

}  // namespace tpusim::runtime::tpusim_backend
