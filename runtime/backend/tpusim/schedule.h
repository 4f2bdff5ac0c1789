#pragma once
// The order the tpusim compiler emits a step's fragments in, and the all-reduces that run while
// later fragments compute.
//
// Overlapped all-reduce (CompileOptions::overlap_allreduce): a cross_replica_sum's collective
// starts once every HBM write before it has landed, as any fragment does, but the fragments after
// it do not wait for it. Only a fragment that reads its result, or writes over a buffer it reads
// or writes, waits for it: the emitter's collectives-done flag reaching the collective's count
// (one flag serves them all, because a core's collective unit runs its collectives in order).
// The emission order moves each cross_replica_sum up to right after the node it reads, so a
// gradient's all-reduce runs while the backward pass computes the gradients of earlier layers,
// as XLA's asynchronous all-reduce does on a TPU.

#include <cstdint>
#include <vector>

#include "runtime/backend/tpusim/allreduce_combiner.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

// Every node of `graph` in the order the compiler emits their fragments: the infeeds first (the
// step lands them all before anything else), then graph order, except that with
// `hoist_collectives` each cross_replica_sum follows right after the node it reads. The members
// of a combined all-reduce (`combined`, when given) all come right before its root, where it runs.
// A node computed with a later one (`computed_with`, per node, -1 for none: a reduction its
// sibling's fragment computes, fusion_plan.h) comes right after that one, and so does every node
// between them that reads it, directly or not, in graph order.
std::vector<int> emission_order(const Graph& graph, bool hoist_collectives,
                                const CombinedAllReduces* combined = nullptr,
                                const std::vector<int>& computed_with = {});

// [begin, end) in HBM, bytes.
struct HbmRange {
  uint64_t begin = 0, end = 0;
  bool overlaps(const HbmRange& o) const { return begin < o.end && o.begin < end; }
};

// The overlapped collectives a core's later fragments may have to wait for.
class CollectivesInFlight {
 public:
  // The collective that brings the collectives-done flag to `count` reads `src` and writes `dst`
  // (a combined all-reduce: every part's).
  void started(uint64_t count, std::vector<HbmRange> src, std::vector<HbmRange> dst);
  // The count a fragment that reads `reads` and writes `writes` must wait for; 0 when it touches
  // nothing in flight.
  uint64_t needed(const std::vector<HbmRange>& reads, const std::vector<HbmRange>& writes) const;
  // A fragment waited for every collective up to `count`; whatever follows it in HBM order comes
  // after them too.
  void retire(uint64_t count);
  bool empty() const { return in_flight_.empty(); }
  // The count of the latest collective in flight (0 when none).
  uint64_t latest() const { return in_flight_.empty() ? 0 : in_flight_.back().count; }

 private:
  struct Collective {
    uint64_t count;
    std::vector<HbmRange> src, dst;
  };
  std::vector<Collective> in_flight_;  // by count
};

}  // namespace tpusim::runtime::tpusim_backend
