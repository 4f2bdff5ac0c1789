// Lowering of elementwise ops, broadcasts, one_hot, argmax and the RNG to row-tiled vector
// fragments.
#include <algorithm>
#include <map>
#include <numeric>

#include "common/strings.h"
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
  if (!l.folded.empty() && l.folded[static_cast<size_t>(id)]) {
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

GroupOperands group_operands(Lowering& l, const std::vector<int>& members, const Shape& out) {
  GroupOperands g;
  for (int m : members) {
    for (int in : l.node(m).inputs) {
      if (contains(members, in) || g.outside.count(in) > 0) continue;
      g.outside[in] = classify_operand(l, in, out);
      if (!g.outside[in].immediate) {
        g.slot[in] = g.tiles.size();
        g.tiles.push_back(g.outside[in].tile);
      }
    }
  }
  return g;
}

// Scratch blocks compute_group takes: one per member, one per operand that needs broadcasting or
// filling, and two for sigmoid's temporary (one spare since bf16 rounding became one op).
uint32_t group_scratch(const std::vector<int>& members) {
  return static_cast<uint32_t>(members.size() + 3 * members.size() + 2);
}

// The group's values in tile `t`, the last member's into `root_out` (the other members' into
// scratch 0 .. members - 1), chained on the vector unit.
void compute_group(Lowering& l, const std::vector<int>& members, const GroupOperands& ops, Tile& t,
                   const isa::Block& root_out) {
  const int root = members.back();
  sim::CoreBuilder& b = t.e_builder();
  size_t next_scratch = members.size();
  auto fresh = [&]() { return t.scratch(next_scratch++); };
  std::map<int, isa::Block> value;  // member -> its block in this tile
  // Input k of member m as a full [rows, cols] block.
  auto full = [&](int m, size_t k) -> isa::Block {
    const int in = l.node(m).inputs[k];
    if (contains(members, in)) return value.at(in);
    const Operand& op = ops.outside.at(in);
    if (op.immediate) {
      const isa::Block block = fresh();
      t.chain(b.fill(block, op.value));
      return block;
    }
    if (op.tile.kind == TileOperand::Kind::kFull) return t.in(ops.slot.at(in));
    const isa::Block block = fresh();
    t.chain(b.broadcast(block, t.in(ops.slot.at(in))));
    return block;
  };
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    const Node& n = l.node(m);
    const bool is_root = m == root;
    const isa::Block result = is_root && n.dtype != DType::kBF16 ? root_out : t.scratch(i);
    if (is_binary_elementwise(n.op)) {
      const isa::Block a = full(m, 0);
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
          const isa::Block x = full(m, 0);
          const isa::Block tmp = fresh();
          t.chain(b.unary(Vector::NEG, tmp, x));
          t.chain(b.unary(Vector::EXP, tmp, tmp));
          t.chain(b.binary_scalar(Vector::ADD, tmp, tmp, 1.0f));
          t.chain(b.fill(result, 1.0f));
          t.chain(b.binary(Vector::DIV, result, result, tmp));
          break;
        }
        case Op::kSelect:
          t.chain(b.select(result, full(m, 0), full(m, 1), full(m, 2)));
          break;
        case Op::kCast:  // the source is f32 here (s32 sources were widened); s32 truncates
          t.chain(n.dtype == DType::kS32 ? b.cast(root_out, full(m, 0))
                                         : b.unary(Vector::COPY, result, full(m, 0)));
          break;
        default:
          t.chain(b.unary(vector_op(n.op), result, full(m, 0)));
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
  l.emit.rowwise(l.address(root), rows_of(out), cols_of(out), buffer_dtype(root_node), ops.tiles,
                 group_scratch(members), 0,
                 [&](Tile& t) { compute_group(l, members, ops, t, t.out()); });
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
  return Emitter::tile_bytes(widths, 1) <= Emitter::slot_bytes(core);
}

// The group (its members but the reduction) computed tile by tile into scratch and reduced there:
// the last axis per row into the tile's output rows; the leading axes down each tile's rows, the
// tiles' partial rows combined in order in an accumulator that is written once at the end.
absl::Status lower_fused_reduction(Lowering& l, const std::vector<int>& members) {
  const int reduce = members.back();
  const Node& r = l.node(reduce);
  const std::vector<int> group(members.begin(), members.end() - 1);
  const Node& x = l.node(group.back());
  const Shape& shape = x.shape;
  const uint64_t rows = rows_of(shape);
  const uint32_t cols = cols_of(shape);
  const bool max = r.op == Op::kReduceMax;
  const Vector::Op vop = max ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  GroupOperands ops = group_operands(l, group, shape);
  for (TileOperand& in : ops.tiles) {  // widths against the group's view, not the output's
    if (in.kind != TileOperand::Kind::kColumn && in.cols == 0) in.cols = cols;
  }
  const uint32_t scratch = group_scratch(group) + 1;  // the last: the group's value
  if (reduction_fusion(l.graph, reduce) == ReductionFusion::kLastAxis) {
    l.emit.rowwise(l.address(reduce), rows, 1, isa::F32, ops.tiles, scratch, cols, [&](Tile& t) {
      const isa::Block value = t.scratch(scratch - 1);
      compute_group(l, group, ops, t, value);
      t.chain(t.e_builder().reduce(vop, t.out(), value, 1));
    });
    return absl::OkStatus();
  }
  const isa::Block sum = l.emit.reduce_rows(rows, ops.tiles, scratch + 1, cols, cols, [&](Tile& t) {
    sim::CoreBuilder& b = t.e_builder();
    const isa::Block value = t.scratch(scratch - 1);
    compute_group(l, group, ops, t, value);
    if (t.first_row() == 0) {
      t.chain(b.reduce(vop, t.accumulator(), value, 0));
      return;
    }
    const isa::Block part = block(t.scratch(scratch).address(), 1, cols, isa::F32);
    t.chain(b.reduce(vop, part, value, 0));
    t.chain(b.binary(max ? Vector::MAX : Vector::ADD, t.accumulator(), t.accumulator(), part));
  });
  Tile last = l.emit.epilogue();
  last.store(sum, block(l.address(reduce), 1, cols, isa::F32), last.chain_count());
  return absl::OkStatus();
}

namespace {

// A broadcast whose repeated output dims form one contiguous run [first, last) between dims the
// input fills in order: out = [outer, k, inner], in = [outer, inner]. Fills `dims` and returns
// true when that is the case.
bool insert_block(const Shape& in, const std::vector<int64_t>& map, const Shape& out,
                  int64_t* outer, int64_t* k, int64_t* inner) {
  std::vector<bool> mapped(static_cast<size_t>(out.rank()), false);
  for (size_t i = 0; i < map.size(); ++i) {
    if (in.dim(static_cast<int>(i)) != out.dim(static_cast<int>(map[i])))
      return false;  // a stretched size-1 dim
    mapped[static_cast<size_t>(map[i])] = true;
  }
  int first = -1, last = -1;
  for (int d = 0; d < out.rank(); ++d) {
    if (mapped[static_cast<size_t>(d)]) continue;
    if (first < 0)
      first = d;
    else if (last != d)
      return false;  // a second run
    last = d + 1;
  }
  if (first < 0) return false;
  *outer = 1, *k = 1, *inner = 1;
  for (int d = 0; d < out.rank(); ++d) (d < first ? *outer : d < last ? *k : *inner) *= out.dim(d);
  return true;
}

}  // namespace

void emit_broadcast(Lowering& l, uint64_t src, const Shape& in, const std::vector<int64_t>& map,
                    const Shape& out, uint64_t dst) {
  int64_t outer = 0, k = 0, inner = 0;
  if (insert_block(in, map, out, &outer, &k, &inner) && (outer == 1 || inner * k <= (1 << 20))) {
    // out [outer, k * inner]: row broadcast (outer 1), column broadcast (inner 1), or k copies
    // of each input row into strided slices.
    const auto width = static_cast<uint32_t>(k * inner);
    if (outer == 1) {
      l.emit.rowwise(dst, static_cast<uint64_t>(k), static_cast<uint32_t>(inner), isa::F32,
                     {TileOperand{TileOperand::Kind::kRow, src, isa::F32}}, 0, 0,
                     [](Tile& t) { t.chain(t.e_builder().broadcast(t.out(), t.in(0))); });
    } else if (inner == 1) {
      l.emit.rowwise(dst, static_cast<uint64_t>(outer), width, isa::F32,
                     {TileOperand{TileOperand::Kind::kColumn, src, isa::F32}}, 0, 0,
                     [](Tile& t) { t.chain(t.e_builder().broadcast(t.out(), t.in(0))); });
    } else {
      l.emit.rowwise(
          dst, static_cast<uint64_t>(outer), width, isa::F32,
          {TileOperand{TileOperand::Kind::kFull, src, isa::F32, static_cast<uint32_t>(inner)}}, 0,
          0, [&](Tile& t) {
            for (int64_t j = 0; j < k; ++j) {
              const isa::Block slice =
                  block(t.out().address() + static_cast<uint64_t>(j * inner) * 4, t.rows(),
                        static_cast<uint32_t>(inner), isa::F32, static_cast<uint64_t>(width) * 4);
              t.chain(t.e_builder().unary(Vector::COPY, slice, t.in(0)));
            }
          });
    }
    return;
  }
  emit_broadcast_general(l, src, in, map, out, dst);
}

void emit_broadcast_general(Lowering& l, uint64_t src, const Shape& in,
                            const std::vector<int64_t>& map, const Shape& out, uint64_t dst) {
  // Output as [batch, P, Q]; the input contributes a [P', Q'] block per batch index.
  const int rank = out.rank();
  const int64_t q = rank >= 1 ? out.dim(rank - 1) : 1;
  const int64_t p = rank >= 2 ? out.dim(rank - 2) : 1;
  const int64_t batch = out.elements() / std::max<int64_t>(1, p * q);
  const auto in_strides = in.strides();
  int64_t p_in = 1, q_in = 1, p_stride = 0;
  std::vector<std::pair<int, int64_t>>
      batch_dims;  // (output dim, input stride) of mapped batch dims
  for (size_t i = 0; i < map.size(); ++i) {
    const int d = static_cast<int>(map[i]);
    const int64_t size = in.dim(static_cast<int>(i));
    if (size == 1) continue;
    if (d == rank - 1)
      q_in = size;
    else if (d == rank - 2) {
      p_in = size;
      p_stride = in_strides[i];
    } else {
      batch_dims.emplace_back(d, in_strides[i]);
    }
  }
  const auto out_strides = out.strides();
  for (int64_t bi = 0; bi < batch; ++bi) {
    // The batch index's input offset.
    int64_t offset = 0;
    for (const auto& [d, stride] : batch_dims) {
      const int64_t idx = (bi * p * q / out_strides[static_cast<size_t>(d)]) % out.dim(d);
      offset += idx * stride;
    }
    const uint64_t from = src + static_cast<uint64_t>(offset) * 4;
    const uint64_t to = dst + static_cast<uint64_t>(bi * p * q) * 4;
    // One [p, q] output block from the input's [p_in, q_in] block: gathered into a temporary
    // with its own stride, then broadcast by a row-tiled fragment.
    const uint64_t packed = l.hbm.temporary(static_cast<uint64_t>(p_in * q_in) * 4);
    l.emit.copy(from, static_cast<uint64_t>(p_stride) * 4, packed, static_cast<uint64_t>(q_in) * 4,
                static_cast<uint64_t>(p_in), static_cast<uint32_t>(q_in), isa::F32);
    TileOperand operand{TileOperand::Kind::kFull, packed, isa::F32};
    if (p_in == 1 && q_in == q) operand.kind = TileOperand::Kind::kRow;
    if (p_in == p && q_in == 1) operand.kind = TileOperand::Kind::kColumn;
    if (p_in == 1 && q_in == 1) {
      operand.kind = TileOperand::Kind::kRow;
      operand.cols = 1;
    }
    const bool scalar = p_in == 1 && q_in == 1;
    l.emit.rowwise(to, static_cast<uint64_t>(p), static_cast<uint32_t>(q), isa::F32, {operand}, 1,
                   1, [&](Tile& t) {
                     sim::CoreBuilder& b = t.e_builder();
                     if (operand.kind == TileOperand::Kind::kFull) {
                       t.chain(b.unary(Vector::COPY, t.out(), t.in(0)));
                     } else if (scalar) {
                       t.chain(b.broadcast(t.scratch(0, 1), t.in(0)));  // [1,1] -> [rows, 1]
                       t.chain(b.broadcast(t.out(), t.scratch(0, 1)));  // -> [rows, q]
                     } else {
                       t.chain(b.broadcast(t.out(), t.in(0)));
                     }
                   });
  }
}

absl::Status lower_broadcast(Lowering& l, int id) {
  const Node& n = l.node(id);
  emit_broadcast(l, l.address(n.inputs[0]), l.node(n.inputs[0]).shape, n.attrs.axes, n.shape,
                 l.address(id));
  return absl::OkStatus();
}

absl::Status lower_one_hot(Lowering& l, int id) {
  const Node& n = l.node(id);
  const auto depth = static_cast<uint32_t>(n.attrs.depth);
  std::vector<float> iota(depth);
  std::iota(iota.begin(), iota.end(), 0.0f);
  const uint64_t iota_row = l.hbm.constant(iota);
  const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / depth;
  l.emit.rowwise(l.address(id), rows, depth, isa::F32,
                 {TileOperand{TileOperand::Kind::kColumn, l.address(n.inputs[0]), isa::S32},
                  TileOperand{TileOperand::Kind::kRow, iota_row, isa::F32}},
                 2, 0, [&](Tile& t) {
                   sim::CoreBuilder& b = t.e_builder();
                   t.chain(b.cast(t.scratch(0, 1), t.in(0)));            // labels as f32 [rows, 1]
                   t.chain(b.broadcast(t.scratch(1), t.scratch(0, 1)));  // [rows, depth]
                   t.chain(b.binary(Vector::CMP_EQ, t.out(), t.scratch(1), t.in(1)));
                 });
  return absl::OkStatus();
}

// The first index of the maximum along the last axis: -max(select(x == max, -iota, -inf)).
absl::Status lower_argmax(Lowering& l, int id) {
  const Node& n = l.node(id);
  Shape in = l.node(n.inputs[0]).shape;
  uint64_t src = l.address(n.inputs[0]);
  if (n.attrs.axis != in.rank() - 1) {
    // Move the axis last (the other dims keep their order, as in the output), then as below.
    std::vector<int64_t> perm;
    for (int d = 0; d < in.rank(); ++d) {
      if (d != n.attrs.axis) perm.push_back(d);
    }
    perm.push_back(n.attrs.axis);
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(in.dim(static_cast<int>(p)));
    const uint64_t moved = l.hbm.temporary(static_cast<uint64_t>(in.elements()) * 4);
    if (absl::Status s = emit_transpose(l, src, in, perm, moved); !s.ok()) return s;
    src = moved;
    in = Shape(dims);
  }
  const uint32_t cols = cols_of(in);
  std::vector<float> neg_iota(cols), floor_row(cols, -3.0e38f);
  for (uint32_t i = 0; i < cols; ++i) neg_iota[i] = -static_cast<float>(i);
  const uint64_t neg_iota_row = l.hbm.constant(neg_iota);
  const uint64_t floor = l.hbm.constant(floor_row);
  l.emit.rowwise(l.address(id), rows_of(in), 1, isa::S32,
                 {TileOperand{TileOperand::Kind::kFull, src, isa::F32, cols},
                  TileOperand{TileOperand::Kind::kRow, neg_iota_row, isa::F32, cols},
                  TileOperand{TileOperand::Kind::kRow, floor, isa::F32, cols}},
                 3, cols, [&](Tile& t) {
                   sim::CoreBuilder& b = t.e_builder();
                   const isa::Block max = t.scratch(0, 1);
                   t.chain(b.reduce(Vector::REDUCE_MAX, max, t.in(0), 1));
                   t.chain(b.binary(Vector::CMP_EQ, t.scratch(1), t.in(0), max));
                   t.chain(b.select(t.scratch(2), t.scratch(1), t.in(1), t.in(2)));
                   t.chain(b.reduce(Vector::REDUCE_MAX, max, t.scratch(2), 1));
                   t.chain(b.unary(Vector::NEG, max, max));
                   t.chain(b.cast(t.out(), max));
                 });
  return absl::OkStatus();
}

absl::Status lower_rng(Lowering& l, int id) {
  const Node& n = l.node(id);
  const uint32_t cols = cols_of(n.shape);
  const uint64_t seed = n.attrs.seed;
  l.emit.rowwise(l.address(id), rows_of(n.shape), cols, isa::F32, {}, 0, 0, [&](Tile& t) {
    auto ref = t.e_builder().fill(t.out(), 0);
    isa::Vector* v = ref.instruction().mutable_vector();
    v->set_op(Vector::RNG_UNIFORM);
    v->set_seed(seed);
    v->set_index_base(t.first_row() * cols);
    t.chain(ref);
  });
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
