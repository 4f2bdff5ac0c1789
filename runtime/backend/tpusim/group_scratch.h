#pragma once
// Which VMEM scratch block each value of a fused elementwise group takes in a tile (lower_fused
// and the fused reductions compute the group member by member, each op writing its own block).
// A member's value holds its block from its op until the last member that reads it has run, or
// to the end of the tile when the caller reads it after the group (`kept`); an operand filled or
// broadcast for one op, and sigmoid's temporary, hold theirs for that op only. A block is reused
// as soon as it is free, as XLA's fused loops keep a value in registers only while it is live;
// the fewer blocks a tile takes, the more rows fit a tile slot.

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

struct GroupScratch {
  static constexpr int kNone = -1;
  // Per member (in the group's order): the block its op writes; kNone for the last member when
  // it writes the caller's output block directly (not bf16: a bf16 value is rounded from its
  // block into the output).
  std::vector<int> result;
  // Per member, per input: the block that input is filled or broadcast into for the op; kNone
  // when the op reads it where it is (a member's block, a full operand, an immediate scalar).
  std::vector<std::array<int, 3>> operand;
  std::vector<int> temporary;  // per member: sigmoid's temporary; kNone for other ops
  uint32_t blocks = 0;         // scratch blocks the tile takes
};

// `needs_block(member, input)`: whether that input of that member (from outside the group) is
// filled or broadcast into a block of its own for the op. `last_to_output`: the last member
// writes the caller's output block unless it is bf16.
GroupScratch plan_group_scratch(const Graph& graph, const std::vector<int>& members,
                                const std::vector<int>& kept,
                                const std::function<bool(int member, size_t input)>& needs_block,
                                bool last_to_output);

}  // namespace tpusim::runtime::tpusim_backend
