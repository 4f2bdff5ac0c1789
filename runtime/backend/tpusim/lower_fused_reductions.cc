// Lowering of reductions that compute their input's elementwise group in VMEM: a fused reduction
// alone, sibling reductions in one fragment, and the producer group a reduction takes in.
#include <algorithm>

#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

// The group (its members but the reduction) computed tile by tile into scratch and reduced there:
// the last axis per row into the tile's output rows; the leading axes down each tile's rows, the
// tiles' partial rows combined in order in an accumulator that is written once at the end.
absl::Status lower_fused_reduction(Lowering& l, const std::vector<int>& members) {
  const int reduce = members.back();
  // Down the rows: the one-reduction case of the sibling fragment (the same tiles and sums).
  if (reduction_fusion(l.graph, reduce) != ReductionFusion::kLastAxis)
    return lower_sibling_reductions(l, {members});
  const std::vector<int> group(members.begin(), members.end() - 1);
  const Shape& shape = l.node(group.back()).shape;
  const uint32_t cols = cols_of(shape);
  const Vector::Op vop =
      l.node(reduce).op == Op::kReduceMax ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  GroupOperands ops = group_operands(l, group, shape);
  for (TileOperand& in : ops.tiles) {  // widths against the group's view, not the output's
    if (!in.scalar_or_column() && in.cols == 0) in.cols = cols;
  }
  const GroupScratch plan = plan_scratch(l, group, ops, {}, true);
  const uint32_t scratch = plan.blocks + 1;  // the last: the group's value
  l.emit.rowwise(l.address(reduce), rows_of(shape), 1, isa::F32, ops.tiles, scratch, cols,
                 [&](Tile& t) {
                   const isa::Block value = t.scratch(scratch - 1);
                   sim::VectorChain chain;
                   compute_group(l, group, ops, plan, tile_blocks(t), value, chain, true);
                   chain.add(sim::vector_ops::reduce(vop, t.out(), value, 1));
                   // A bf16 sum rounded where it is made (leaves_f32_sums).
                   if (leaves_f32_sums(l.node(reduce)))
                     chain.add(sim::vector_ops::unary(Vector::ROUND_BF16, t.out(), t.out()));
                   t.chain(t.e_builder().vector(chain.instruction()));
                 });
  return absl::OkStatus();
}

namespace {

// A reduction reading a producer's value through its widening alias (a reshape to its own shape)
// reads the value the fragment computes, not the buffer the fragment is still writing: the
// aliases the members and plain reductions read are computed as members too (a copy in
// registers), and the producer's value is no plain reduction's operand.
void take_in_producer_aliases(const Graph& g, int root, std::vector<int>* elementwise,
                              std::vector<int>* plain_inputs) {
  auto alias_of_root = [&](int id) {
    const Node& n = g.node(id);
    return n.op == Op::kReshape && n.inputs[0] == root && n.shape == g.node(root).shape;
  };
  std::vector<int> aliases;
  for (int m : *elementwise) {
    for (int in : g.node(m).inputs) {
      if (alias_of_root(in)) aliases.push_back(in);
    }
  }
  for (int x : *plain_inputs) {
    if (alias_of_root(x)) aliases.push_back(x);
  }
  for (int a : aliases) {
    if (std::find(elementwise->begin(), elementwise->end(), a) == elementwise->end())
      elementwise->push_back(a);
  }
  plain_inputs->erase(std::remove(plain_inputs->begin(), plain_inputs->end(), root),
                      plain_inputs->end());
}

// The reductions' sums (`sums`, one row of `cols` each, then a value each for reductions over
// every axis, which reduce their row into it) written once every tile's part is in, a bf16 sum
// rounded first, as XLA fuses the convert into the reduction (leaves_f32_sums).
void store_sums(Lowering& l, const std::vector<std::vector<int>>& reductions,
                const isa::Block& sums, uint32_t cols) {
  Tile last = l.emit.epilogue();
  for (size_t i = 0; i < reductions.size(); ++i) {
    const int r = reductions[i].back();
    isa::Block sum = block(sums.address() + i * cols * 4, 1, cols, isa::F32);
    if (reduction_fusion(l.graph, r) == ReductionFusion::kAllAxes) {
      const isa::Block whole =
          block(sums.address() + (reductions.size() * cols + i) * 4, 1, 1, isa::F32);
      const bool max = l.node(r).op == Op::kReduceMax;
      last.chain(
          l.emit.builder().reduce(max ? Vector::REDUCE_MAX : Vector::REDUCE_SUM, whole, sum, 1));
      sum = whole;
    }
    if (leaves_f32_sums(l.node(r))) round_bf16_in_tile(last, sum, true);
    last.store(sum, block(l.address(r), 1, sum.cols(), isa::F32), last.chain_count());
  }
}

// A plain reduction over the last axis that computes its input's producer group in its tiles and
// writes the group's value beside its sums (take_in_producers: softmax's exponentials, which its
// division reads too): each tile's value reduced across its rows and stored to the producer's
// buffer, the input read once instead of written by one fragment and read back by the next. A
// producer its other readers compute again (fusion_plan.h) is not written.
absl::Status lower_row_reduction_with_producer(Lowering& l, int reduce,
                                               const std::vector<int>& producer) {
  std::vector<int> elementwise = producer, plain_inputs;
  take_in_producer_aliases(l.graph, producer.back(), &elementwise, &plain_inputs);
  std::sort(elementwise.begin(), elementwise.end());
  const Shape& shape = l.node(producer.back()).shape;
  const uint32_t cols = cols_of(shape);
  GroupOperands ops = group_operands(l, elementwise, shape, plain_inputs);
  for (TileOperand& in : ops.tiles) {  // widths against the group's view
    if (!in.scalar_or_column() && in.cols == 0) in.cols = cols;
  }
  const GroupScratch plan = plan_scratch(l, elementwise, ops, {}, true);
  const uint32_t scratch = plan.blocks + 1;  // the last: the group's value
  const Vector::Op vop =
      l.node(reduce).op == Op::kReduceMax ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  const bool stored = l.fusion == nullptr || !l.fusion->node(producer.back()).recomputed;
  const uint64_t value_hbm = l.address(producer.back());
  l.emit.rowwise(
      l.address(reduce), rows_of(shape), 1, isa::F32, ops.tiles, scratch, cols, [&](Tile& t) {
        const isa::Block value = t.scratch(scratch - 1);
        sim::VectorChain chain;
        compute_group(l, elementwise, ops, plan, tile_blocks(t), value, chain, !stored);
        chain.add(sim::vector_ops::reduce(vop, t.out(), value, 1));
        if (leaves_f32_sums(l.node(reduce)))
          chain.add(sim::vector_ops::unary(Vector::ROUND_BF16, t.out(), t.out()));
        t.chain(t.e_builder().vector(chain.instruction()));
        if (stored)
          t.store(value, block(value_hbm + t.first_row() * cols * 4, t.rows(), cols, isa::F32),
                  t.chain_count());
      });
  return absl::OkStatus();
}

}  // namespace

SiblingMembers sibling_members(const Graph& g, const std::vector<std::vector<int>>& reductions,
                               const std::vector<int>& producer) {
  // No reduction's group reads another's: their members are computed together.
  SiblingMembers out;
  out.elementwise = producer;
  for (const std::vector<int>& members : reductions) {
    out.elementwise.insert(out.elementwise.end(), members.begin(), members.end() - 1);
    if (members.size() == 1) out.plain_inputs.push_back(g.node(members.back()).inputs[0]);
    out.kept.push_back(g.node(members.back()).inputs[0]);
  }
  if (!producer.empty())
    take_in_producer_aliases(g, producer.back(), &out.elementwise, &out.plain_inputs);
  std::sort(out.elementwise.begin(), out.elementwise.end());
  return out;
}

SiblingReductions plan_sibling_reductions(Lowering& l,
                                          const std::vector<std::vector<int>>& reductions,
                                          const std::vector<int>& producer,
                                          const std::vector<int>& given) {
  SiblingReductions r;
  r.reductions = reductions;
  SiblingMembers members = sibling_members(l.graph, reductions, producer);
  r.elementwise = std::move(members.elementwise);
  r.plain_inputs = std::move(members.plain_inputs);
  const Shape& shape = reductions.empty()
                           ? l.node(producer.back()).shape
                           : l.node(l.node(reductions.front().back()).inputs[0]).shape;
  r.rows = rows_of(shape);
  r.cols = cols_of(shape);
  r.ops = group_operands(l, r.elementwise, shape, r.plain_inputs, false, given);
  for (TileOperand& in : r.ops.tiles) {  // widths against the inputs' view
    if (!in.scalar_or_column() && in.cols == 0) in.cols = r.cols;
  }
  r.plan = plan_scratch(l, r.elementwise, r.ops, members.kept, true);
  // A producer its other readers compute again (fusion_plan.h) is not written.
  r.stored = producer.empty() || (l.fusion != nullptr && l.fusion->node(producer.back()).recomputed)
                 ? -1
                 : producer.back();
  return r;
}

void SiblingReductions::compute(Lowering& l, const GroupBlocks& blocks, const isa::Block& value,
                                const isa::Block& part, const isa::Block& accumulator, bool first,
                                sim::VectorChain& chain) const {
  namespace vo = sim::vector_ops;
  if (!elementwise.empty())
    compute_group(l, elementwise, ops, plan, blocks, value, chain, true, stored);
  // Where a reduction's input sits in a tile: a member's block (the last member's in the value
  // block; the stored producer's in the output) or the operand a plain reduction reads.
  auto input_of = [&](int reduction) -> isa::Block {
    const int x = l.node(reduction).inputs[0];
    const auto at = std::find(elementwise.begin(), elementwise.end(), x);
    if (at == elementwise.end()) return blocks.in(ops.slot.at(x));
    if (x == stored) return blocks.out();
    if (x == elementwise.back()) return value;
    return blocks.scratch(
        static_cast<size_t>(plan.result[static_cast<size_t>(at - elementwise.begin())]));
  };
  for (size_t i = 0; i < reductions.size(); ++i) {
    const int r = reductions[i].back();
    const bool max = l.node(r).op == Op::kReduceMax;
    const Vector::Op vop = max ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
    const isa::Block sum = block(accumulator.address() + i * cols * 4, 1, cols, isa::F32);
    if (first) {
      chain.add(vo::reduce(vop, sum, input_of(r), 0));
      continue;
    }
    chain.add(vo::reduce(vop, part, input_of(r), 0), true);
    chain.add(vo::binary(max ? Vector::MAX : Vector::ADD, sum, sum, part));
  }
}

void SiblingReductions::store(Lowering& l, const isa::Block& sums) const {
  store_sums(l, reductions, sums, cols);
}

absl::Status lower_sibling_reductions(Lowering& l, const std::vector<std::vector<int>>& reductions,
                                      const std::vector<int>& producer) {
  if (reductions.size() == 1 && reductions[0].size() == 1 && !producer.empty() &&
      reduction_fusion(l.graph, reductions[0].back()) == ReductionFusion::kLastAxis)
    return lower_row_reduction_with_producer(l, reductions[0].back(), producer);
  const SiblingReductions r = plan_sibling_reductions(l, reductions, producer);
  const uint32_t scratch = r.plan.blocks + 1;  // the last: the last member's value
  auto body = [&](Tile& t) {
    sim::VectorChain chain;
    r.compute(l, tile_blocks(t), t.scratch(scratch - 1),
              block(t.scratch(scratch).address(), 1, r.cols, isa::F32), t.accumulator(),
              t.first_row() == 0, chain);
    t.chain(t.e_builder().vector(chain.instruction()));
  };
  // With a producer, each tile also writes the producer's value (the band: every row, whole).
  const isa::Block sums =
      r.stored < 0
          ? l.emit.reduce_rows(r.rows, r.ops.tiles, scratch + 1, r.cols, r.accumulated(), body)
          : l.emit.rowwise_bands(r.rows,
                                 {TileBand{{TileOperand::Kind::kFull, l.address(r.stored),
                                            buffer_dtype(l.node(r.stored)), r.cols},
                                           r.ops.tiles,
                                           r.cols}},
                                 scratch + 1, r.accumulated(), [&](Tile& t, size_t) { body(t); });
  r.store(l, sums);
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
