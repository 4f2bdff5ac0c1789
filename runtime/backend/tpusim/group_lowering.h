#pragma once
// How the tpusim compiler computes a fused elementwise group in a tile (lower_elementwise.cc),
// shared by the fragments that compute one: fused groups and reductions, sibling reductions, and
// the fused convolutions that compute their images' producer group (image_producer.cc).

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "runtime/backend/tpusim/group_scratch.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

// A numpy-broadcast operand relative to the output's [rows, cols] view.
struct Operand {
  bool immediate = false;  // a constant scalar folded into the instruction
  float value = 0;
  TileOperand tile;
  // A row that changes every `row_period` rows of the output's [rows, cols] view: an operand
  // [outer..., 1, ..., 1, cols] broadcast over the dims between its leading ones and its last
  // (BERT's attention mask, [batch, 1, 1, keys], over heads and queries). tile is kRow at the
  // first such row. 0 for any other operand.
  uint64_t row_period = 0;
};
// How a group of `out`'s shape reads node `id`: an immediate scalar, a folded broadcast's input
// as a row, column or scalar, the value itself, with `periodic_rows` a row per period of rows
// (row_period) where the group is emitted period by period, or (anything else) the value
// broadcast to `out`'s shape in a temporary first.
Operand classify_operand(Lowering& l, int id, const Shape& out, bool periodic_rows = false);

// The operands of a fused group of elementwise nodes (every distinct input from outside the
// group, classified once against the group's shape) and the tile operands they load.
struct GroupOperands {
  std::map<int, Operand> outside;
  std::vector<TileOperand> tiles;
  std::map<int, size_t> slot;
  // The rows of the output's view each periodic row operand covers (all share it; others are
  // materialised), 0 for none; which tiles are such rows.
  uint64_t row_period = 0;
  std::vector<bool> periodic;
};
// `extra`: inputs read from outside the group besides its members' (a plain reduction's).
// `periodic_rows`: the caller emits the group a period of rows at a time (periodic_tiles).
// `given`: inputs of the group's shape the caller makes in VMEM itself (a product the group
// consumes): full operands with a slot, but no buffer to load (their tiles' hbm 0).
GroupOperands group_operands(Lowering& l, const std::vector<int>& members, const Shape& out,
                             const std::vector<int>& extra = {}, bool periodic_rows = false,
                             const std::vector<int>& given = {});
// The group's tile operands for its `period`-th period of rows (ops.row_period rows each): the
// full and column operands moved to those rows, the periodic rows to their `period`-th row.
std::vector<TileOperand> periodic_tiles(const GroupOperands& ops, uint64_t period, uint32_t cols);

// The scratch a group's tile takes (group_scratch.h): an input from outside takes a block when it
// is filled (an immediate another way than as a binary op's right operand) or broadcast (a row
// or column operand).
GroupScratch plan_scratch(const Lowering& l, const std::vector<int>& members,
                          const GroupOperands& ops, const std::vector<int>& kept,
                          bool last_to_output);

// Where a group's blocks sit in a tile: its loaded operands (by slot), its scratch blocks and the
// tile's output (a multi-output fusion's extra output).
struct GroupBlocks {
  std::function<isa::Block(size_t slot)> in;
  std::function<isa::Block(size_t j)> scratch;
  std::function<isa::Block()> out;
  // The tile's first row in the group's [rows, cols] view, where an rng_uniform member's draws
  // start (the row times cols); empty where the group has none (a convolution's image bands).
  std::function<uint64_t()> first_row;
};
// A row tile's blocks.
GroupBlocks tile_blocks(Tile& t);

// The group's values in tile `t` as `plan` places them, the last member's into `root_out`, as
// steps of `chain`: every value but the root's kept in registers when they fit (the root's too
// when `root_in_register`: a reduction later in the chain reads it).
// `stored`: a member (not the last) whose value goes to the tile's output block `t.out()` too,
// as a multi-output fusion's extra output (-1: none).
void compute_group(Lowering& l, const std::vector<int>& members, const GroupOperands& ops,
                   const GroupScratch& plan, const GroupBlocks& t, const isa::Block& root_out,
                   sim::VectorChain& chain, bool root_in_register = false, int stored = -1);

// What sibling reductions' fragment (and the producer group it takes in) computes elementwise:
// every group's elementwise members and the producer's widening aliases its members or plain
// reductions read, in graph order; the plain reductions' inputs, loaded as operands; and the
// reductions' inputs, each kept in its block to the end of the group. The lowering lays the
// fragment out from it, and the planner that lets a convolution compute the fragment sizes it
// from the same.
struct SiblingMembers {
  std::vector<int> elementwise;
  std::vector<int> plain_inputs;
  std::vector<int> kept;
};
SiblingMembers sibling_members(const Graph& g, const std::vector<std::vector<int>>& reductions,
                               const std::vector<int>& producer);

// Sibling reductions down the rows (and the producer group they take in) as one tile computes
// them (lower_sibling_reductions; a convolution input gradient taking in the group that reads
// its output: conv_fusion.cc): every elementwise member of every group computed together, each
// reduction's column sums of the tile added to its row of the accumulator.
struct SiblingReductions {
  std::vector<std::vector<int>> reductions;  // each group's members, its reduction last
  std::vector<int> elementwise;              // every group's elementwise members, in graph order
  std::vector<int> plain_inputs;             // what reductions without a group read
  GroupOperands ops;
  GroupScratch plan;
  int stored = -1;  // the producer written to the tile's output block (-1: none)
  uint64_t rows = 0;
  uint32_t cols = 0;
  // The accumulator: the sums' rows, and a value each after them (store_sums).
  uint32_t accumulated() const {
    const auto count = static_cast<uint32_t>(reductions.size());
    return count * cols + count;
  }
  // The tile's part, as steps of `chain`: the members into `blocks` (the last one's value into
  // `value`), each reduction's sums into the accumulator's rows (`first`: the tile starts
  // them), through `part`, a row of cols.
  void compute(Lowering& l, const GroupBlocks& blocks, const isa::Block& value,
               const isa::Block& part, const isa::Block& accumulator, bool first,
               sim::VectorChain& chain) const;
  // The sums written once every tile's part is in.
  void store(Lowering& l, const isa::Block& sums) const;
};
// `given`: values of the inputs' shape the caller makes in VMEM (group_operands).
SiblingReductions plan_sibling_reductions(Lowering& l,
                                          const std::vector<std::vector<int>>& reductions,
                                          const std::vector<int>& producer,
                                          const std::vector<int>& given = {});

}  // namespace tpusim::runtime::tpusim_backend
