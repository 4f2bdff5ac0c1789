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

// Whether a group's values fit the vector registers, which the steps of its chain keep them in
// (as XLA's fused loop body keeps a fusion's intermediates in vregs): its scratch blocks, its
// loaded operands and the value a reduction reads. Else every value goes through VMEM.
bool fits_registers(const Lowering& l, const GroupScratch& plan, const GroupOperands& ops) {
  return plan.blocks + ops.tiles.size() + 1 <= l.emit.core().vector_registers;
}

// The group's values in tile `t` as `plan` places them, the last member's into `root_out`, as
// steps of `chain`: every value but the root's kept in registers when they fit (the root's too
// when `root_in_register`: a reduction later in the chain reads it).
// `stored`: a member (not the last) whose value goes to the tile's output block `t.out()` too,
// as a multi-output fusion's extra output (-1: none).
void compute_group(Lowering& l, const std::vector<int>& members, const GroupOperands& ops,
                   const GroupScratch& plan, Tile& t, const isa::Block& root_out,
                   sim::VectorChain& chain, bool root_in_register = false, int stored = -1) {
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
    const bool result_in_register =
        to_output ? false : to_root ? root_in_register && registers : registers;
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
          const isa::Block x = full(i, 0);
          const isa::Block tmp = t.scratch(static_cast<size_t>(plan.temporary[i]));
          scratch_step(vo::unary(Vector::NEG, tmp, x));
          scratch_step(vo::unary(Vector::EXP, tmp, tmp));
          scratch_step(vo::binary_scalar(Vector::ADD, tmp, tmp, 1.0f));
          step(vo::fill(result, 1.0f));
          step(vo::binary(Vector::DIV, result, result, tmp));
          break;
        }
        case Op::kSelect:
          step(vo::select(result, full(i, 0), full(i, 1), full(i, 2)));
          break;
        case Op::kReshape:  // to its own shape: the value again (a member's widening alias)
          step(vo::unary(Vector::COPY, result, full(i, 0)));
          break;
        case Op::kCast:  // the source is f32 here (s32 sources were widened); s32 truncates
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
                to_output ? false : is_root ? root_in_register && registers : registers);
    }
    value[m] = value_block;
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
                 plan.blocks, 0, [&](Tile& t) {
                   sim::VectorChain chain;
                   compute_group(l, members, ops, plan, t, t.out(), chain);
                   t.chain(t.e_builder().vector(chain.instruction()));
                 });
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
                   sim::VectorChain chain;
                   compute_group(l, group, ops, plan, t, value, chain, true);
                   chain.add(sim::vector_ops::reduce(vop, t.out(), value, 1));
                   t.chain(t.e_builder().vector(chain.instruction()));
                 });
  return absl::OkStatus();
}

namespace {

// A reduction reading a producer's value through its widening alias (a reshape to its own shape)
// reads the value the fragment computes, not the buffer the fragment is still writing: the
// aliases the members and plain reductions read are computed as members too (a copy in
// registers), and the producer's value is no plain reduction's operand.
void take_in_producer_aliases(const Lowering& l, int root, std::vector<int>* elementwise,
                              std::vector<int>* plain_inputs) {
  auto alias_of_root = [&](int id) {
    const Node& n = l.node(id);
    return n.op == Op::kReshape && n.inputs[0] == root && n.shape == l.node(root).shape;
  };
  std::vector<int> aliases;
  for (int m : *elementwise) {
    for (int in : l.node(m).inputs) {
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

}  // namespace

absl::Status lower_sibling_reductions(Lowering& l,
                                      const std::vector<std::vector<int>>& reductions,
                                      const std::vector<int>& producer) {
  // Every elementwise member of every group (and of the producer group), computed together (no
  // reduction's group reads another's), and the plain reductions' inputs as operands.
  std::vector<int> elementwise = producer, plain_inputs;
  for (const std::vector<int>& members : reductions) {
    elementwise.insert(elementwise.end(), members.begin(), members.end() - 1);
    if (members.size() == 1) plain_inputs.push_back(l.node(members.back()).inputs[0]);
  }
  if (!producer.empty()) take_in_producer_aliases(l, producer.back(), &elementwise, &plain_inputs);
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
  const int stored = producer.empty() ? -1 : producer.back();
  auto input_of = [&](Tile& t, int reduction) -> isa::Block {
    const int x = l.node(reduction).inputs[0];
    const auto at = std::find(elementwise.begin(), elementwise.end(), x);
    if (at == elementwise.end()) return t.in(ops.slot.at(x));
    if (x == stored) return t.out();
    if (x == elementwise.back()) return t.scratch(scratch - 1);
    return t.scratch(static_cast<size_t>(plan.result[static_cast<size_t>(at - elementwise.begin())]));
  };
  auto sum_of = [&](const isa::Block& accumulator, size_t i) {
    return block(accumulator.address() + i * cols * 4, 1, cols, isa::F32);
  };
  const auto count = static_cast<uint32_t>(reductions.size());
  auto body = [&](Tile& t) {
        namespace vo = sim::vector_ops;
        sim::VectorChain chain;
        if (!elementwise.empty())
          compute_group(l, elementwise, ops, plan, t, t.scratch(scratch - 1), chain, true, stored);
        const isa::Block part = block(t.scratch(scratch).address(), 1, cols, isa::F32);
        for (size_t i = 0; i < reductions.size(); ++i) {
          const int r = reductions[i].back();
          const bool max = l.node(r).op == Op::kReduceMax;
          const Vector::Op vop = max ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
          if (t.first_row() == 0) {
            chain.add(vo::reduce(vop, sum_of(t.accumulator(), i), input_of(t, r), 0));
            continue;
          }
          chain.add(vo::reduce(vop, part, input_of(t, r), 0), true);
          chain.add(vo::binary(max ? Vector::MAX : Vector::ADD, sum_of(t.accumulator(), i),
                               sum_of(t.accumulator(), i), part));
        }
        t.chain(t.e_builder().vector(chain.instruction()));
  };
  // With a producer, each tile also writes the producer's value (the band: every row, whole).
  const isa::Block sums =
      stored < 0
          ? l.emit.reduce_rows(rows, ops.tiles, scratch + 1, cols, count * cols, body)
          : l.emit.rowwise_bands(
                rows,
                {TileBand{{TileOperand::Kind::kFull, l.address(stored), buffer_dtype(l.node(stored)),
                           cols},
                          ops.tiles, cols}},
                scratch + 1, count * cols, [&](Tile& t, size_t) { body(t); });
  Tile last = l.emit.epilogue();
  for (size_t i = 0; i < reductions.size(); ++i) {
    last.store(sum_of(sums, i), block(l.address(reductions[i].back()), 1, cols, isa::F32),
               last.chain_count());
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
