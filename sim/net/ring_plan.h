#pragma once
// How a collective is carried out: which rings of members pass which region of the buffer in
// which phase. Shared by the timing (chunk_schedule.h) and the numerics
// (collective_numerics.h), so that both follow the same order.
//
// A ring pass over members m_0 .. m_{k-1} splits its region into k segments (the first
// `elements % k` one element longer). Reduce-scatter: in step t member i sends segment
// (i - t - 1) mod k to member i+1, which adds it to its own; after k-1 steps member i holds
// segment i summed over the ring, added up in ring order starting at member i+1. All-gather:
// in step t member i sends segment (i - t) mod k on. A chunk of a segment travels one chain of
// members through every step, so the two phases pipeline chunk by chunk.

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/isa/isa.pb.h"
#include "sim/net/topology.h"

namespace tpusim::sim {

struct RingPass {
  std::vector<CoreId> members;  // cores, in ring order
  uint64_t offset = 0;          // the region: elements [offset, offset + elements) of a buffer
  uint64_t elements = 0;
  bool reduce_scatter = true;
  bool all_gather = true;
  TieBreak ties = TieBreak::kPositive;  // kNegative for a ring that goes round the negative way

  uint32_t size() const { return static_cast<uint32_t>(members.size()); }
  uint32_t steps() const {
    const uint32_t k = size();
    return k < 2 ? 0 : (reduce_scatter ? k - 1 : 0) + (all_gather ? k - 1 : 0);
  }
  uint64_t segment_begin(uint32_t s) const;  // relative to the region
  uint64_t segment_size(uint32_t s) const;
  // The segment member i sends in step t.
  uint32_t segment_sent(uint32_t member, uint32_t step) const;
};

// The phases of a collective: a pass of phase p+1 works on what phase p left at its members
// (torus2d: the columns all-reduce what the rows reduce-scattered). Every pass starts at once;
// the data a member's pass needs from an earlier phase gates it range by range (the timing
// waits for each chunk's bytes, not for the whole phase), so the phases pipeline too.
using CollectivePlan = std::vector<std::vector<RingPass>>;

// An all-reduce of elements [offset, offset + elements) over a grid of sizes[0] x sizes[1] x ...
// cores (core_of gives the core at a coordinate): the lines along each axis but the last reduce-
// scatter, in axis order, each on the segment the earlier axes left it; the lines along the last
// axis all-reduce theirs; then the lines all-gather back along the other axes in reverse order.
// `reverse`: every ring goes the other way round (from the highest coordinate down). torus2d is
// one such over the grid (X', Y'); torus is 2D of them over the dimensions (X', Y, Z).
CollectivePlan hierarchical_all_reduce(
    uint64_t offset, uint64_t elements, const std::vector<uint32_t>& sizes,
    const std::function<CoreId(const std::vector<uint32_t>&)>& core_of, bool reverse = false);

// The members of `c` issued by core `core` in ring order (the group, or the slice's snake ring).
std::vector<CoreId> collective_members(const isa::Collective& c, const Topology& topology);

// The plan of an ALL_REDUCE, REDUCE_SCATTER or ALL_GATHER over `members` (not PERMUTE).
CollectivePlan plan_collective(const isa::Collective& c, const std::vector<CoreId>& members,
                               const Topology& topology);

}  // namespace tpusim::sim
