#include "sim/units/vector_unit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/isa/ops.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/nan_order.h"
#include "sim/numerics/random.h"
#include "sim/units/vector_cost.h"

namespace tpusim::sim {

namespace {

using isa::Vector;

// Calls f on each op an instruction runs: a chain's steps, or the instruction itself (no
// allocation: this runs per instruction).
template <typename F>
void for_each_op(const Vector& v, F f) {
  if (v.op() != Vector::CHAIN) {
    f(v);
    return;
  }
  for (const Vector& step : v.steps()) f(step);
}

// Calls f on every block the instruction's ops name.
template <typename F>
void for_each_block(const Vector& v, F f) {
  for_each_op(v, [&](const Vector& op) {
    f(op.dst());
    if (op.has_a()) f(op.a());
    if (op.has_b()) f(op.b());
    if (op.has_c()) f(op.c());
  });
}

// Operand b (or c) of a binary op as a full matrix of dst's shape.
MatrixF broadcast_to(const MatrixF& x, Eigen::Index rows, Eigen::Index cols) {
  if (x.rows() == rows && x.cols() == cols) return x;
  if (x.rows() == 1 && x.cols() == cols) return x.replicate(rows, 1);
  if (x.cols() == 1 && x.rows() == rows) return x.replicate(1, cols);
  return x.replicate(rows, cols);  // 1 x 1
}

}  // namespace

VectorUnit::VectorUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
                       VectorWiring wiring)
    : Unit(name, ctx, stats, "vector unit (VPU)", /*core_work=*/true),
      spec_(wiring.spec),
      vmem_(wiring.vmem),
      numerics_(wiring.numerics) {
  stats_.add("elements", "elements", "elements processed",
             [this] { return static_cast<double>(elements_); });
  stats_.on_reset([this] { elements_ = 0; });
}

void VectorUnit::execute(const IssuedInstruction& item) {
  const Vector& v = item.instr->vector();
  const config::CoreSpec& core = spec_;
  for_each_block(v, [this](const isa::Block& b) { vmem_.touch(end_address(b)); });
  const uint64_t start = ctx_.now_cycle();
  const VectorCost cost = vector_cost(v, core);
  const double vmem_end =
      vmem_.ports().reserve(static_cast<double>(start), static_cast<double>(cost.vmem_bytes)).end;
  const uint64_t end = std::max(start + cost.issue_cycles, ceil_cycle(vmem_end));
  const uint64_t latency =
      core.vector_latency_cycles + (cost.transcendental ? core.transcendental_latency_cycles : 0);
  if (!ctx_.timing_only()) post_compute(v);
  elements_ += cost.elements;
  busy_cycles_ += end - start;
  trace(vector_op_name(v.op()), start, end);
  profile(start, end + latency, {static_cast<double>(cost.flop_elements)});
  ctx_.sync().complete_at(end + latency, item.instr->signal());
  wait_until(end);
}

namespace {

using StridedF32 = Eigen::Map<MatrixF, 0, Eigen::OuterStride<>>;

// An f32 block of VMEM viewed in place (no copy), rows `row_stride` floats apart.
StridedF32 view(uint8_t* vmem, const isa::Block& b) {
  return StridedF32(reinterpret_cast<float*>(vmem + b.address()), b.rows(), b.cols(),
                    Eigen::OuterStride<>(static_cast<Eigen::Index>(row_stride(b) / 4)));
}

bool same_shape(const isa::Block& x, const isa::Block& y) {
  return x.rows() == y.rows() && x.cols() == y.cols();
}

// Safe to read `x` while writing `dst` element by element: disjoint, or the very same elements.
bool no_partial_overlap(const isa::Block& x, const isa::Block& dst) {
  const bool disjoint = end_address(x) <= dst.address() || end_address(dst) <= x.address();
  const bool identical = x.address() == dst.address() && row_stride(x) == row_stride(dst);
  return disjoint || identical;
}

// Fill, copy and full-shape binary arithmetic on f32 blocks straight in VMEM: the same values
// as the general path below, without copying operands into matrices and back (im2col's copies
// and its adjoint's adds move most of a convolution's bytes). False when `v` needs the general
// path.
bool compute_in_place(uint8_t* vmem, const Vector& v) {
  const isa::Block& dst = v.dst();
  if (dst.dtype() != isa::F32) return false;
  const bool a_f32 = v.has_a() && v.a().dtype() == isa::F32 && same_shape(v.a(), dst) &&
                     no_partial_overlap(v.a(), dst);
  switch (v.op()) {
    case Vector::FILL:
      view(vmem, dst).setConstant(v.scalar());
      return true;
    case Vector::COPY:
      if (!a_f32) return false;
      view(vmem, dst) = view(vmem, v.a());
      return true;
    case Vector::ADD:
    case Vector::SUB:
    case Vector::MUL:
    case Vector::MAX:
    case Vector::MIN: {
      if (!a_f32 || !v.has_b() || v.b().dtype() != isa::F32 || !same_shape(v.b(), dst) ||
          !no_partial_overlap(v.b(), dst)) {
        return false;
      }
      // Operands may alias dst (an in-place accumulate): elementwise, so in place is safe.
      auto a = view(vmem, v.a()).array();
      auto b = view(vmem, v.b()).array();
      auto out = view(vmem, dst).array();
      switch (v.op()) {
        case Vector::ADD:
          out = a + b;
          break;
        case Vector::SUB:
          out = a - b;
          break;
        case Vector::MUL:
          out = a * b;
          break;
        case Vector::MAX:
          out = a.binaryExpr(b, NanMaxOp{});  // NaN if either is, as XLA's max
          break;
        default:
          out = a.binaryExpr(b, NanMinOp{});
          break;
      }
      return true;
    }
    default:
      return false;
  }
}

// The max along `axis` (0: of each column), NaN where any term is, as XLA's reduce with max:
// Eigen's vectorised maxCoeff (which may pass over a NaN) corrected where the sum says a NaN may
// be there (a NaN term makes the sum NaN; so do +inf and -inf, told apart term by term). A
// reduction with a NaN-propagating functor is not vectorised: 30 times the time.
MatrixF nan_reduce_max(const MatrixF& a, int axis) {
  MatrixF out = axis == 0 ? MatrixF(a.colwise().maxCoeff()) : MatrixF(a.rowwise().maxCoeff());
  const MatrixF sums = axis == 0 ? MatrixF(a.colwise().sum()) : MatrixF(a.rowwise().sum());
  for (Eigen::Index k = 0; k < sums.size(); ++k) {
    if (!std::isnan(sums.data()[k])) continue;
    const bool nan = axis == 0 ? a.col(k).array().isNaN().any() : a.row(k).array().isNaN().any();
    if (nan) out.data()[k] = std::numeric_limits<float>::quiet_NaN();
  }
  return out;
}

// The ops of `a` alone (elementwise, reductions, transpose) into `out`; false for any other.
bool unary_op(const Vector& v, const MatrixF& a, MatrixF* out) {
  switch (v.op()) {
    case Vector::COPY:
      *out = a;
      return true;
    case Vector::NEG:
      *out = -a;
      return true;
    case Vector::ABS:
      *out = a.array().abs();
      return true;
    case Vector::RELU:
      *out = a.unaryExpr(NanReluOp{});  // NaN stays NaN, as XLA's max(x, 0)
      return true;
    case Vector::EXP:
      *out = a.array().exp();
      return true;
    case Vector::LOG:
      *out = a.array().log();
      return true;
    case Vector::TANH:
      *out = a.array().tanh();
      return true;
    case Vector::RSQRT:
      *out = a.array().rsqrt();
      return true;
    case Vector::SQUARE:
      *out = a.array().square();
      return true;
    case Vector::ROUND_BF16:
      *out = a.unaryExpr([](float x) { return round_to_bf16(x); });
      return true;
    case Vector::ERF:
      *out = a.unaryExpr([](float x) { return std::erf(x); });
      return true;
    case Vector::CAST:
      *out = a;
      return true;  // store_block rounds to dst's dtype
    case Vector::REDUCE_SUM:
      // Fixed order (Eigen's, for a given shape): runs are bitwise reproducible.
      *out = v.axis() == 0 ? MatrixF(a.colwise().sum()) : MatrixF(a.rowwise().sum());
      return true;
    case Vector::REDUCE_MAX:
      *out = nan_reduce_max(a, v.axis());
      return true;
    case Vector::TRANSPOSE:
      *out = a.transpose();
      return true;
    default:
      return false;
  }
}

}  // namespace

void VectorUnit::post_compute(const Vector& v) {
  uint8_t* vmem = vmem_.memory().base_covering(0, spec_.vmem_bytes);
  // What the op reads and writes: the hulls of its operands and of its results (a chain's steps').
  HostRange read, written;
  auto widen = [](HostRange* hull, const HostRange& r) {
    *hull = hull->lo == nullptr ? r : HostRange{std::min(hull->lo, r.lo), std::max(hull->hi, r.hi)};
  };
  for_each_op(v, [&](const Vector& op) {
    for (const isa::Block* operand :
         {op.has_a() ? &op.a() : nullptr, op.has_b() ? &op.b() : nullptr,
          op.has_c() ? &op.c() : nullptr}) {
      if (operand != nullptr) widen(&read, host_range(vmem, *operand));
    }
    widen(&written, host_range(vmem, op.dst()));
    vmem_.note_write(op.dst().address(), end_address(op.dst()));
  });
  const uint64_t step = ctx_.step();
  numerics_.post(false, read, written, [vmem, &v, step] {
    for_each_op(v, [&](const Vector& op) { compute(vmem, op, step); });
  });
}

void VectorUnit::compute(uint8_t* vmem, const Vector& v, uint64_t step) {
  const isa::Block& dst = v.dst();
  if (compute_in_place(vmem, v)) return;
  MatrixF a, b, c, out;
  if (v.has_a()) load_block(vmem, v.a(), &a);
  if (v.has_b()) load_block(vmem, v.b(), &b);
  if (v.has_c()) load_block(vmem, v.c(), &c);
  const Eigen::Index rows = dst.rows();
  const Eigen::Index cols = dst.cols();
  // b and c as dst's shape: a row, a column or a 1 x 1 broadcast once, a full block as loaded
  // (no copy); without b, binary ops take the scalar immediate.
  if (v.has_b() && (b.rows() != rows || b.cols() != cols)) b = broadcast_to(b, rows, cols);
  if (v.has_c() && (c.rows() != rows || c.cols() != cols)) c = broadcast_to(c, rows, cols);
  auto operand_b = [&]() -> const MatrixF& {
    if (!v.has_b()) b = MatrixF::Constant(rows, cols, v.scalar());
    return b;
  };
  if (unary_op(v, a, &out)) {
    store_block(vmem, dst, out);
    return;
  }
  switch (v.op()) {
    case Vector::ADD:
      out = a.array() + operand_b().array();
      break;
    case Vector::SUB:
      out = a.array() - operand_b().array();
      break;
    case Vector::MUL:
      out = a.array() * operand_b().array();
      break;
    case Vector::DIV:
      out = a.array() / operand_b().array();
      break;
    case Vector::MAX:
      out = a.binaryExpr(operand_b(), NanMaxOp{});
      break;
    case Vector::MIN:
      out = a.binaryExpr(operand_b(), NanMinOp{});
      break;
    case Vector::CMP_GT:
      out = (a.array() > operand_b().array()).cast<float>();
      break;
    case Vector::CMP_GE:
      out = (a.array() >= operand_b().array()).cast<float>();
      break;
    case Vector::CMP_EQ:
      out = (a.array() == operand_b().array()).cast<float>();
      break;
    case Vector::SELECT:
      out = (a.array() != 0.0f).select(b, c);
      break;
    case Vector::BROADCAST:
      out = broadcast_to(a, rows, cols);
      break;
    case Vector::FILL:
      out = MatrixF::Constant(rows, cols, v.scalar());
      break;
    case Vector::RNG_UNIFORM:
      out.resize(rows, cols);
      for (Eigen::Index i = 0; i < out.size(); ++i) {
        out.data()[i] = counter_uniform(v.seed(), step, v.index_base() + static_cast<uint64_t>(i));
      }
      break;
    default:
      throw std::logic_error("vector unit: unknown op (the validator should have rejected it)");
  }
  store_block(vmem, dst, out);
}

}  // namespace tpusim::sim
