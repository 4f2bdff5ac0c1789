// Lowering of elementwise ops, alone or fused into groups, to row-tiled vector fragments; which
// broadcasts and scalars they read in place; how a group is computed in a tile (group_lowering.h).
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "common/strings.h"
#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_lowering.h"
#include "sim/isa/vector_checks.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

isa::DType buffer_dtype(const Node& n) { return n.dtype == DType::kS32 ? isa::S32 : isa::F32; }

namespace {

std::vector<int64_t> numpy_map(const Shape& in, const Shape& out) {
  std::vector<int64_t> map(static_cast<size_t>(in.rank()));
  std::iota(map.begin(), map.end(), out.rank() - in.rank());
  return map;
}

// f32 copy of an s32 buffer, in a temporary.
uint64_t as_f32(Lowering& l, uint64_t src, const Shape& s) {
  const uint64_t dst = l.hbm.temporary(static_cast<uint64_t>(s.elements()) * 4);
  l.emit.rowwise(dst, rows_of(s), cols_of(s), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, src, isa::S32}}, 0, 0,
                 [](Tile& t) { t.chain(t.e_builder().cast(t.out(), t.in(0))); });
  return dst;
}

}  // namespace

Operand classify_operand(Lowering& l, int id, const Shape& out, bool periodic_rows) {
  const Node& n = l.node(id);
  Operand op;
  if (foldable_scalar(l.graph, id, &op.value)) {
    op.immediate = true;
    return op;
  }
  if (l.fusion != nullptr && l.fusion->node(id).folded) {
    // A folded broadcast (of floats, read by fragments of its own shape, as the compiler checks):
    // its input, in place.
    const FoldedBroadcast fold = broadcast_fold(l.graph, id);
    op.tile = {fold == FoldedBroadcast::kRow      ? TileOperand::Kind::kRow
               : fold == FoldedBroadcast::kScalar ? TileOperand::Kind::kScalar
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
  } else if (n.shape.elements() == 1) {
    // A computed scalar (a learning rate, a bias correction, a norm's ratio): loaded once and
    // broadcast by the vector ops that read it, as XLA fuses a scalar's broadcast into every
    // consumer; never materialised at the output's shape.
    op.tile = {TileOperand::Kind::kScalar, src, isa::F32};
  } else if (row) {
    op.tile = {TileOperand::Kind::kRow, src, isa::F32};
  } else if (col) {
    op.tile = {TileOperand::Kind::kColumn, src, isa::F32};
  } else if (const uint64_t period = periodic_rows ? row_period(n.shape, out) : 0; period > 0) {
    // Read a row at a time where the group is emitted a period of rows at a time, as XLA fuses
    // the broadcast into its consumer: never materialised at the output's shape.
    op.tile = {TileOperand::Kind::kRow, src, isa::F32};
    op.row_period = period;
  } else {
    // Anything else is materialised at the output's shape first.
    const uint64_t full = l.hbm.temporary(static_cast<uint64_t>(out.elements()) * 4);
    emit_broadcast(l, src, n.shape, numpy_map(n.shape, out), out, full);
    op.tile = {TileOperand::Kind::kFull, full, isa::F32};
  }
  (void)cols;
  return op;
}

namespace {

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

bool contains(const std::vector<int>& members, int id) {
  return std::find(members.begin(), members.end(), id) != members.end();
}

}  // namespace

GroupOperands group_operands(Lowering& l, const std::vector<int>& members, const Shape& out,
                             const std::vector<int>& extra, bool periodic_rows,
                             const std::vector<int>& given) {
  GroupOperands g;
  auto add = [&](int in) {
    if (contains(members, in) || g.outside.count(in) > 0) return;
    Operand op;
    if (contains(given, in)) {
      op.tile = {TileOperand::Kind::kFull, 0, isa::F32};
    } else {
      op = classify_operand(l, in, out, periodic_rows);
    }
    if (op.row_period > 0 && g.row_period > 0 && op.row_period != g.row_period)
      op = classify_operand(l, in, out);  // another period: materialised
    if (op.row_period > 0) g.row_period = op.row_period;
    g.outside[in] = op;
    if (!op.immediate) {
      g.slot[in] = g.tiles.size();
      g.tiles.push_back(op.tile);
      g.periodic.push_back(op.row_period > 0);
    }
  };
  for (int m : members) {
    for (int in : l.node(m).inputs) add(in);
  }
  for (int in : extra) add(in);
  return g;
}

std::vector<TileOperand> periodic_tiles(const GroupOperands& ops, uint64_t period, uint32_t cols) {
  const uint64_t first_row = period * ops.row_period;
  std::vector<TileOperand> tiles = ops.tiles;
  for (size_t i = 0; i < tiles.size(); ++i) {
    TileOperand& t = tiles[i];
    if (ops.periodic[i]) {
      t.hbm += period * cols * 4;
    } else if (t.kind == TileOperand::Kind::kFull || t.kind == TileOperand::Kind::kColumn) {
      const uint64_t width = t.kind == TileOperand::Kind::kColumn ? 1 : t.cols > 0 ? t.cols : cols;
      t.hbm += first_row * (t.stride > 0 ? t.stride : width * 4);
    }
  }
  return tiles;
}

namespace {

// Scratch blocks a group could take without reusing any (fused_group_fits's bound): one per
// member, one per operand that needs broadcasting or filling, and two for sigmoid's temporary.
uint32_t group_scratch(const std::vector<int>& members) {
  return static_cast<uint32_t>(members.size() + 3 * members.size() + 2);
}

}  // namespace

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

namespace {

// Whether a group's values fit the vector registers, which the steps of its chain keep them in
// (as XLA's fused loop body keeps a fusion's intermediates in vregs): its scratch blocks, its
// loaded operands and the value a reduction reads. Else every value goes through VMEM.
bool fits_registers(const Lowering& l, const GroupScratch& plan, const GroupOperands& ops) {
  return plan.blocks + ops.tiles.size() + 1 <= l.emit.core().vector_registers;
}

}  // namespace

namespace {

// Sigmoid's denominator, 1 + exp(-x), into `tmp`: three vector steps.
std::vector<isa::Vector> sigmoid_denominator(const isa::Block& tmp, const isa::Block& x) {
  namespace vo = sim::vector_ops;
  return {vo::unary(Vector::NEG, tmp, x), vo::unary(Vector::EXP, tmp, tmp),
          vo::binary_scalar(Vector::ADD, tmp, tmp, 1.0f)};
}

}  // namespace

GroupBlocks tile_blocks(Tile& t) {
  return {[&t](size_t i) { return t.in(i); }, [&t](size_t j) { return t.scratch(j); },
          [&t] { return t.out(); }, [&t] { return t.first_row(); }};
}

void compute_group(Lowering& l, const std::vector<int>& members, const GroupOperands& ops,
                   const GroupScratch& plan, const GroupBlocks& t, const isa::Block& root_out,
                   sim::VectorChain& chain, bool root_in_register, int stored) {
  namespace vo = sim::vector_ops;
  const int root = members.back();
  const bool registers = fits_registers(l, plan, ops);
  std::map<int, isa::Block> value;  // member -> its block in this tile
  // Appends a step whose result is a scratch value (in registers when they fit).
  auto scratch_step = [&](isa::Vector step) { chain.add(std::move(step), registers); };
  // Input k of member i as a full [rows, cols] block.
  auto full = [&](size_t i, size_t k) -> isa::Block {
    const int in = l.node(members[i]).inputs[k];
    if (contains(members, in)) return value.at(in);
    const Operand& op = ops.outside.at(in);
    if (op.tile.kind == TileOperand::Kind::kFull && !op.immediate) return t.in(ops.slot.at(in));
    const isa::Block block = t.scratch(static_cast<size_t>(plan.operand[i][k]));
    scratch_step(op.immediate ? vo::fill(block, op.value)
                              : vo::unary(Vector::BROADCAST, block, t.in(ops.slot.at(in))));
    return block;
  };
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    const Node& n = l.node(m);
    const bool is_root = m == root;
    const bool to_root = plan.result[i] == GroupScratch::kNone;
    const bool to_output = m == stored;
    const isa::Block result = to_output ? t.out()
                              : to_root ? root_out
                                        : t.scratch(static_cast<size_t>(plan.result[i]));
    // The op's result: the root's output unless bf16 rounds it there below.
    const bool result_in_register = to_output ? false
                                    : to_root ? root_in_register && registers
                                              : registers;
    const bool rounds = n.dtype == DType::kBF16;
    auto step = [&](isa::Vector v) {
      chain.add(std::move(v), rounds && is_root ? registers : result_in_register);
    };
    if (is_binary_elementwise(n.op)) {
      const isa::Block a = full(i, 0);
      const int rhs = n.inputs[1];
      if (!contains(members, rhs) && ops.outside.at(rhs).immediate) {
        step(vo::binary_scalar(vector_op(n.op), result, a, ops.outside.at(rhs).value));
      } else {
        step(vo::binary(vector_op(n.op), result, a,
                        contains(members, rhs) ? value.at(rhs) : t.in(ops.slot.at(rhs))));
      }
    } else {
      switch (n.op) {
        case Op::kSigmoid: {  // 1 / (1 + exp(-x))
          const isa::Block tmp = t.scratch(static_cast<size_t>(plan.temporary[i]));
          for (isa::Vector s : sigmoid_denominator(tmp, full(i, 0))) scratch_step(std::move(s));
          step(vo::fill(result, 1.0f));
          step(vo::binary(Vector::DIV, result, result, tmp));
          break;
        }
        case Op::kSelect:
          step(vo::select(result, full(i, 0), full(i, 1), full(i, 2)));
          break;
        case Op::kRngUniform:  // counter-based: the tile's draws are the flat value's at its rows
          step(vo::rng_uniform(result, n.attrs.seed, t.first_row() * result.cols()));
          break;
        case Op::kReshape:  // to its own shape: the value again (a member's widening alias)
        case Op::kCast:     // the source is f32 here (s32 sources were widened); s32 truncates
          if (n.dtype == DType::kS32) {
            chain.add(vo::unary(Vector::CAST, root_out, full(i, 0)));
          } else {
            step(vo::unary(Vector::COPY, result, full(i, 0)));
          }
          break;
        default:
          step(vo::unary(vector_op(n.op), result, full(i, 0)));
          break;
      }
    }
    const isa::Block value_block = to_output ? t.out() : is_root ? root_out : result;
    if (rounds) {  // bf16 values, as a TPU's vector unit stores a bf16 result
      chain.add(vo::unary(Vector::ROUND_BF16, value_block, result),
                to_output ? false
                : is_root ? root_in_register && registers
                          : registers);
    }
    value[m] = value_block;
  }
}

absl::Status lower_fused(Lowering& l, const std::vector<int>& members) {
  const int root = members.back();
  const Node& root_node = l.node(root);
  if (root_node.op == Op::kReduceSum || root_node.op == Op::kReduceMax)
    return lower_fused_reduction(l, members);
  const Shape out = root_node.shape;
  const GroupOperands ops = group_operands(l, members, out, {}, true);
  const GroupScratch plan = plan_scratch(l, members, ops, {}, true);
  uint64_t first = 0;  // the first row of the rows emitted (a period's, below)
  auto body = [&](Tile& t) {
    sim::VectorChain chain;
    GroupBlocks blocks = tile_blocks(t);
    blocks.first_row = [&t, &first] { return first + t.first_row(); };
    compute_group(l, members, ops, plan, blocks, t.out(), chain);
    t.chain(t.e_builder().vector(chain.instruction()));
  };
  const uint32_t cols = cols_of(out);
  if (ops.row_period == 0) {
    l.emit.rowwise(l.address(root), rows_of(out), cols, buffer_dtype(root_node), ops.tiles,
                   plan.blocks, 0, body);
    return absl::OkStatus();
  }
  // A period of rows at a time, each with its row of the periodic operands (XLA's fused loop
  // indexes the broadcast's input by the output's leading dims).
  const uint64_t periods = rows_of(out) / ops.row_period;
  for (uint64_t p = 0; p < periods; ++p) {
    first = p * ops.row_period;
    l.emit.rowwise(l.address(root) + first * cols * 4, ops.row_period, cols,
                   buffer_dtype(root_node), periodic_tiles(ops, p, cols), plan.blocks, 0, body);
  }
  return absl::OkStatus();
}

ReductionFusion reduction_fusion(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  const bool bf16 = n.dtype == DType::kBF16;
  if ((n.op != Op::kReduceSum && n.op != Op::kReduceMax) || (n.dtype != DType::kF32 && !bf16))
    return ReductionFusion::kNone;
  const Shape& in = graph.node(n.inputs[0]).shape;
  const int rank = in.rank();
  std::vector<int64_t> axes = n.attrs.axes;
  std::sort(axes.begin(), axes.end());
  if (rank == 0 || axes.empty()) return ReductionFusion::kNone;
  // A bf16 sum across a row is summed in f32 in one row's order and rounded where it is made,
  // fused or not; down the rows only f32 ones fuse.
  if (axes == std::vector<int64_t>{rank - 1}) return ReductionFusion::kLastAxis;
  if (bf16) return ReductionFusion::kNone;
  std::vector<int64_t> leading(static_cast<size_t>(rank - 1));
  std::iota(leading.begin(), leading.end(), 0);
  if (rank >= 2 && axes == leading) return ReductionFusion::kLeadingAxes;
  leading.push_back(rank - 1);
  if (rank >= 2 && axes == leading) return ReductionFusion::kAllAxes;
  return ReductionFusion::kNone;
}

uint64_t fused_member_steps(const Node& n) {
  return n.inputs.size() + (n.op == Op::kSigmoid ? 5 : 1) + (n.dtype == DType::kBF16 ? 1 : 0);
}

bool fused_group_fits(const Graph& graph, const std::vector<int>& members,
                      const config::CoreSpec& core) {
  std::vector<int> elementwise;  // with the rng_uniform members, each a block too
  for (int m : members) {
    const Op op = graph.node(m).op;
    if (is_elementwise(op) || op == Op::kRngUniform) elementwise.push_back(m);
  }
  if (elementwise.empty()) return true;
  uint64_t steps = kFusedGroupFixedSteps;
  for (int m : elementwise) steps += fused_member_steps(graph.node(m));
  if (steps > static_cast<uint64_t>(sim::kMaxChainSteps)) return false;
  const Shape& shape = graph.node(elementwise.back()).shape;
  // The group's scratch, its value and a partial row (a reduction's), its output, and at most one
  // operand per input.
  uint64_t blocks = group_scratch(elementwise) + 3;
  for (int m : elementwise) blocks += graph.node(m).inputs.size();
  const std::vector<uint64_t> widths(blocks, cols_of(shape));
  return Emitter::tile_bytes(widths, 1) <= tile_slot_bytes(core);
}

}  // namespace tpusim::runtime::tpusim_backend
