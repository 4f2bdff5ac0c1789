// Lowering of elementwise ops, alone or fused into groups (and a reduction taking in its input's
// group), to row-tiled vector fragments; which broadcasts and scalars they read in place.
#include <algorithm>
#include <map>
#include <numeric>

#include "common/strings.h"
#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_scratch.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

isa::DType buffer_dtype(const Node& n) { return n.dtype == DType::kS32 ? isa::S32 : isa::F32; }

bool foldable_scalar(const Graph& graph, int id, float* value) {
  const Node& n = graph.node(id);
  if (n.dtype == DType::kS32) return false;
  if (n.op == Op::kConstant) {
    if (n.shape.elements() != 1) return false;
    *value = n.attrs.value.f[0];
    return true;
  }
  if (n.op == Op::kBroadcast || n.op == Op::kReshape)
    return foldable_scalar(graph, n.inputs[0], value);
  return false;
}

FoldedBroadcast broadcast_fold(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kBroadcast || n.dtype == DType::kS32 || n.shape.rank() < 2)
    return FoldedBroadcast::kNone;
  const Shape& in = graph.node(n.inputs[0]).shape;
  const int rank = n.shape.rank();
  // The input's size along each output dim (1 where it has none), its dims in order so that its
  // memory order is the output's.
  std::vector<int64_t> along(static_cast<size_t>(rank), 1);
  for (size_t i = 0; i < n.attrs.axes.size(); ++i) {
    if (i > 0 && n.attrs.axes[i] <= n.attrs.axes[i - 1]) return FoldedBroadcast::kNone;
    along[static_cast<size_t>(n.attrs.axes[i])] = in.dim(static_cast<int>(i));
  }
  bool row = along.back() == n.shape.dim(rank - 1), column = along.back() == 1;
  for (int d = 0; d + 1 < rank; ++d) {
    row = row && along[static_cast<size_t>(d)] == 1;
    column = column && along[static_cast<size_t>(d)] == n.shape.dim(d);
  }
  if (row && !column) return FoldedBroadcast::kRow;
  if (column && !row) return FoldedBroadcast::kColumn;
  return FoldedBroadcast::kNone;  // neither, or a [1, 1] output (a scalar: no row or column)
}

namespace {

std::vector<int64_t> numpy_map(const Shape& in, const Shape& out) {
  std::vector<int64_t> map(static_cast<size_t>(in.rank()));
  std::iota(map.begin(), map.end(), out.rank() - in.rank());
  return map;
}

// A numpy-broadcast operand relative to the output's [rows, cols] view.
struct Operand {
  bool immediate = false;  // a constant scalar folded into the instruction
  float value = 0;
  TileOperand tile;
};

// f32 copy of an s32 buffer, in a temporary.
uint64_t as_f32(Lowering& l, uint64_t src, const Shape& s) {
  const uint64_t dst = l.hbm.temporary(static_cast<uint64_t>(s.elements()) * 4);
  l.emit.rowwise(dst, rows_of(s), cols_of(s), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, src, isa::S32}}, 0, 0,
                 [](Tile& t) { t.chain(t.e_builder().cast(t.out(), t.in(0))); });
  return dst;
}

Operand classify_operand(Lowering& l, int id, const Shape& out) {
  const Node& n = l.node(id);
  Operand op;
  if (foldable_scalar(l.graph, id, &op.value)) {
    op.immediate = true;
    return op;
  }
  if (l.fusion != nullptr && l.fusion->node(id).folded) {
    // A folded broadcast (of floats, read by fragments of its own shape, as the compiler checks):
    // its input, in place.
    op.tile = {broadcast_fold(l.graph, id) == FoldedBroadcast::kRow ? TileOperand::Kind::kRow
                                                                    : TileOperand::Kind::kColumn,
               l.address(n.inputs[0]), isa::F32};
    return op;
  }
  uint64_t src = l.address(id);
  if (n.dtype == DType::kS32) src = as_f32(l, src, n.shape);
  const uint32_t cols = cols_of(out);
  // Dims of the operand lined up with the output's (leading 1s).
  std::vector<int64_t> dims(static_cast<size_t>(out.rank() - n.shape.rank()), 1);
  for (int64_t d : n.shape.dims()) dims.push_back(d);
  bool row = true, col = out.rank() > 0;
  for (int d = 0; d < out.rank(); ++d) {
    const bool last = d == out.rank() - 1;
    if (!last && dims[static_cast<size_t>(d)] != 1) row = false;
    if (last && dims[static_cast<size_t>(d)] != out.dim(d)) row = false;
    if (!last && dims[static_cast<size_t>(d)] != out.dim(d)) col = false;
    if (last && dims[static_cast<size_t>(d)] != 1) col = false;
  }
  if (n.shape == out || (out.rank() == 0)) {
    op.tile = {TileOperand::Kind::kFull, src, isa::F32};
  } else if (row) {
    op.tile = {TileOperand::Kind::kRow, src, isa::F32};
  } else if (col) {
    op.tile = {TileOperand::Kind::kColumn, src, isa::F32};
  } else {
    // Anything else is materialised at the output's shape first.
    const uint64_t full = l.hbm.temporary(static_cast<uint64_t>(out.elements()) * 4);
    emit_broadcast(l, src, n.shape, numpy_map(n.shape, out), out, full);
    op.tile = {TileOperand::Kind::kFull, full, isa::F32};
  }
  (void)cols;
  return op;
}

Vector::Op vector_op(Op op) {
  switch (op) {
    case Op::kAdd:
      return Vector::ADD;
    case Op::kSub:
      return Vector::SUB;
    case Op::kMul:
      return Vector::MUL;
    case Op::kDiv:
      return Vector::DIV;
    case Op::kMax:
      return Vector::MAX;
    case Op::kMin:
      return Vector::MIN;
    case Op::kEqual:
      return Vector::CMP_EQ;
    case Op::kGreater:
      return Vector::CMP_GT;
    case Op::kNeg:
      return Vector::NEG;
    case Op::kRelu:
      return Vector::RELU;
    case Op::kTanh:
      return Vector::TANH;
    case Op::kExp:
      return Vector::EXP;
    case Op::kLog:
      return Vector::LOG;
    case Op::kRsqrt:
      return Vector::RSQRT;
    case Op::kSquare:
      return Vector::SQUARE;
    case Op::kErf:
      return Vector::ERF;
    default:
      return Vector::OP_UNSPECIFIED;
  }
}

}  // namespace

absl::Status lower_elementwise(Lowering& l, int id) { return lower_fused(l, {id}); }

namespace {

// The operands of a fused group of elementwise nodes (every distinct input from outside the
// group, classified once against the group's shape) and the tile operands they load.
struct GroupOperands {
  std::map<int, Operand> outside;
  std::vector<TileOperand> tiles;
  std::map<int, size_t> slot;
};

bool contains(const std::vector<int>& members, int id) {
  return std::find(members.begin(), members.end(), id) != members.end();
}

// `extra`: inputs read from outside the group besides its members' (a plain reduction's).
GroupOperands group_operands(Lowering& l, const std::vector<int>& members, const Shape& out,
                             const std::vector<int>& extra = {}) {
  GroupOperands g;
  auto add = [&](int in) {
    if (contains(members, in) || g.outside.count(in) > 0) return;
    g.outside[in] = classify_operand(l, in, out);
    if (!g.outside[in].immediate) {
      g.slot[in] = g.tiles.size();
      g.tiles.push_back(g.outside[in].tile);
    }
  };
  for (int m : members) {
    for (int in : l.node(m).inputs) add(in);
  }
  for (int in : extra) add(in);
  return g;
}

// Scratch blocks a group could take without reusing any (fused_group_fits's bound): one per
// member, one per operand that needs broadcasting or filling, and two for sigmoid's temporary.
uint32_t group_scratch(const std::vector<int>& members) {
  return static_cast<uint32_t>(members.size() + 3 * members.size() + 2);
}

// The scratch a group's tile takes (group_scratch.h): an input from outside takes a block when it
// is filled (an immediate another way than as a binary op's right operand) or broadcast (a row
// or column operand).
GroupScratch plan_scratch(const Lowering& l, const std::vector<int>& members,
                          const GroupOperands& ops, const std::vector<int>& kept,
                          bool last_to_output) {
  return plan_group_scratch(
      l.graph, members, kept,
      [&](int m, size_t k) {
        const Node& n = l.node(m);
        const Operand& op = ops.outside.at(n.inputs[k]);
        if (op.immediate) return !(is_binary_elementwise(n.op) && k == 1);
        return op.tile.kind != TileOperand::Kind::kFull;
      },
      last_to_output);
}

// The group's values in tile `t` as `plan` places them, the last member's into `root_out`,
// chained on the vector unit.
void compute_group(Lowering& l, const std::vector<int>& members, const GroupOperands& ops,
                   const GroupScratch& plan, Tile& t, const isa::Block& root_out) {
  const int root = members.back();
  sim::CoreBuilder& b = t.e_builder();
  std::map<int, isa::Block> value;  // member -> its block in this tile
  // Input k of member i as a full [rows, cols] block.
  auto full = [&](size_t i, size_t k) -> isa::Block {
    const int in = l.node(members[i]).inputs[k];
    if (contains(members, in)) return value.at(in);
    const Operand& op = ops.outside.at(in);
    if (op.tile.kind == TileOperand::Kind::kFull && !op.immediate) return t.in(ops.slot.at(in));
    const isa::Block block = t.scratch(static_cast<size_t>(plan.operand[i][k]));
    t.chain(op.immediate ? b.fill(block, op.value) : b.broadcast(block, t.in(ops.slot.at(in))));
    return block;
  };
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    const Node& n = l.node(m);
    const bool is_root = m == root;
    const isa::Block result = plan.result[i] == GroupScratch::kNone
                                  ? root_out
                                  : t.scratch(static_cast<size_t>(plan.result[i]));
    if (is_binary_elementwise(n.op)) {
      const isa::Block a = full(i, 0);
      const int rhs = n.inputs[1];
      if (!contains(members, rhs) && ops.outside.at(rhs).immediate) {
        t.chain(b.binary_scalar(vector_op(n.op), result, a, ops.outside.at(rhs).value));
      } else {
        t.chain(b.binary(vector_op(n.op), result, a,
                         contains(members, rhs) ? value.at(rhs) : t.in(ops.slot.at(rhs))));
      }
    } else {
      switch (n.op) {
        case Op::kSigmoid: {  // 1 / (1 + exp(-x))
          const isa::Block x = full(i, 0);
          const isa::Block tmp = t.scratch(static_cast<size_t>(plan.temporary[i]));
          t.chain(b.unary(Vector::NEG, tmp, x));
          t.chain(b.unary(Vector::EXP, tmp, tmp));
          t.chain(b.binary_scalar(Vector::ADD, tmp, tmp, 1.0f));
          t.chain(b.fill(result, 1.0f));
          t.chain(b.binary(Vector::DIV, result, result, tmp));
          break;
        }
        case Op::kSelect:
          t.chain(b.select(result, full(i, 0), full(i, 1), full(i, 2)));
          break;
        case Op::kCast:  // the source is f32 here (s32 sources were widened); s32 truncates
          t.chain(n.dtype == DType::kS32 ? b.cast(root_out, full(i, 0))
                                         : b.unary(Vector::COPY, result, full(i, 0)));
          break;
        default:
          t.chain(b.unary(vector_op(n.op), result, full(i, 0)));
          break;
      }
    }
    if (n.dtype == DType::kBF16)  // bf16 values, as a TPU's vector unit stores a bf16 result
      t.chain(b.unary(Vector::ROUND_BF16, is_root ? root_out : result, result));
    value[m] = is_root ? root_out : result;
  }
}

}  // namespace

absl::Status lower_fused(Lowering& l, const std::vector<int>& members) {
  const int root = members.back();
  const Node& root_node = l.node(root);
  if (root_node.op == Op::kReduceSum || root_node.op == Op::kReduceMax)
    return lower_fused_reduction(l, members);
  const Shape out = root_node.shape;
  const GroupOperands ops = group_operands(l, members, out);
  const GroupScratch plan = plan_scratch(l, members, ops, {}, true);
  l.emit.rowwise(l.address(root), rows_of(out), cols_of(out), buffer_dtype(root_node), ops.tiles,
                 plan.blocks, 0, [&](Tile& t) { compute_group(l, members, ops, plan, t, t.out()); });
  return absl::OkStatus();
}

ReductionFusion reduction_fusion(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if ((n.op != Op::kReduceSum && n.op != Op::kReduceMax) || n.dtype != DType::kF32)
    return ReductionFusion::kNone;
  const Shape& in = graph.node(n.inputs[0]).shape;
  const int rank = in.rank();
  std::vector<int64_t> axes = n.attrs.axes;
  std::sort(axes.begin(), axes.end());
  if (rank == 0 || axes.empty()) return ReductionFusion::kNone;
  if (axes == std::vector<int64_t>{rank - 1}) return ReductionFusion::kLastAxis;
  std::vector<int64_t> leading(static_cast<size_t>(rank - 1));
  std::iota(leading.begin(), leading.end(), 0);
  if (rank >= 2 && axes == leading) return ReductionFusion::kLeadingAxes;
  return ReductionFusion::kNone;
}

bool fused_group_fits(const Graph& graph, const std::vector<int>& members,
                      const config::CoreSpec& core) {
  std::vector<int> elementwise;
  for (int m : members) {
    if (is_elementwise(graph.node(m).op)) elementwise.push_back(m);
  }
  if (elementwise.empty()) return true;
  const Shape& shape = graph.node(elementwise.back()).shape;
  // The group's scratch, its value and a partial row (a reduction's), its output, and at most one
  // operand per input.
  uint64_t blocks = group_scratch(elementwise) + 3;
  for (int m : elementwise) blocks += graph.node(m).inputs.size();
  const std::vector<uint64_t> widths(blocks, cols_of(shape));
  return Emitter::tile_bytes(widths, 1) <= tile_slot_bytes(core);
}

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
    if (in.kind != TileOperand::Kind::kColumn && in.cols == 0) in.cols = cols;
  }
  const GroupScratch plan = plan_scratch(l, group, ops, {}, true);
  const uint32_t scratch = plan.blocks + 1;  // the last: the group's value
  l.emit.rowwise(l.address(reduce), rows_of(shape), 1, isa::F32, ops.tiles, scratch, cols,
                 [&](Tile& t) {
                   const isa::Block value = t.scratch(scratch - 1);
                   compute_group(l, group, ops, plan, t, value);
                   t.chain(t.e_builder().reduce(vop, t.out(), value, 1));
                 });
  return absl::OkStatus();
}

absl::Status lower_sibling_reductions(Lowering& l,
                                      const std::vector<std::vector<int>>& reductions) {
  // Every elementwise member of every group, computed together (no group reads another's), and
  // the plain reductions' inputs as operands.
  std::vector<int> elementwise, plain_inputs;
  for (const std::vector<int>& members : reductions) {
    elementwise.insert(elementwise.end(), members.begin(), members.end() - 1);
    if (members.size() == 1) plain_inputs.push_back(l.node(members.back()).inputs[0]);
  }
  std::sort(elementwise.begin(), elementwise.end());
  const Shape& shape = l.node(l.node(reductions.front().back()).inputs[0]).shape;
  const uint64_t rows = rows_of(shape);
  const uint32_t cols = cols_of(shape);
  GroupOperands ops = group_operands(l, elementwise, shape, plain_inputs);
  for (TileOperand& in : ops.tiles) {  // widths against the inputs' view
    if (in.kind != TileOperand::Kind::kColumn && in.cols == 0) in.cols = cols;
  }
  // The reductions' inputs stay in their blocks to the end of the group.
  std::vector<int> kept;
  for (const std::vector<int>& members : reductions) kept.push_back(l.node(members.back()).inputs[0]);
  const GroupScratch plan = plan_scratch(l, elementwise, ops, kept, true);
  const uint32_t scratch = plan.blocks + 1;  // the last: the last member's value
  // Where a reduction's input sits in a tile: a member's block (the last member's in the value
  // block) or the operand a plain reduction reads.
  auto input_of = [&](Tile& t, int reduction) -> isa::Block {
    const int x = l.node(reduction).inputs[0];
    const auto at = std::find(elementwise.begin(), elementwise.end(), x);
    if (at == elementwise.end()) return t.in(ops.slot.at(x));
    if (x == elementwise.back()) return t.scratch(scratch - 1);
    return t.scratch(static_cast<size_t>(plan.result[static_cast<size_t>(at - elementwise.begin())]));
  };
  auto sum_of = [&](const isa::Block& accumulator, size_t i) {
    return block(accumulator.address() + i * cols * 4, 1, cols, isa::F32);
  };
  const auto count = static_cast<uint32_t>(reductions.size());
  const isa::Block sums =
      l.emit.reduce_rows(rows, ops.tiles, scratch + 1, cols, count * cols, [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        if (!elementwise.empty())
          compute_group(l, elementwise, ops, plan, t, t.scratch(scratch - 1));
        const isa::Block part = block(t.scratch(scratch).address(), 1, cols, isa::F32);
        for (size_t i = 0; i < reductions.size(); ++i) {
          const int r = reductions[i].back();
          const bool max = l.node(r).op == Op::kReduceMax;
          const Vector::Op vop = max ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
          if (t.first_row() == 0) {
            t.chain(b.reduce(vop, sum_of(t.accumulator(), i), input_of(t, r), 0));
            continue;
          }
          t.chain(b.reduce(vop, part, input_of(t, r), 0));
          t.chain(b.binary(max ? Vector::MAX : Vector::ADD, sum_of(t.accumulator(), i),
                           sum_of(t.accumulator(), i), part));
        }
      });
  Tile last = l.emit.epilogue();
  for (size_t i = 0; i < reductions.size(); ++i) {
    last.store(sum_of(sums, i), block(l.address(reductions[i].back()), 1, cols, isa::F32),
               last.chain_count());
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
