#include "sim/isa/vector_checks.h"

#include <tuple>

#include "common/strings.h"
#include "sim/isa/ops.h"

namespace tpusim::sim {
namespace {

using isa::Block;
using isa::Vector;

// b may be a's shape, a row (1 x cols), a column (rows x 1), one value (1 x 1, a scalar operand
// broadcast to every lane), or absent (the immediate).
void check_broadcastable(const VectorCheck& at, const char* what, const Block& b, bool present,
                         const Block& dst) {
  if (!present) return;
  if (!at.vmem_block(what, b)) return;
  if (b.dtype() != isa::F32) at.fail(str_cat(what, " must be f32"));
  const bool same = b.rows() == dst.rows() && b.cols() == dst.cols();
  const bool row = b.rows() == 1 && b.cols() == dst.cols();
  const bool col = b.cols() == 1 && b.rows() == dst.rows();
  const bool one = b.rows() == 1 && b.cols() == 1;
  if (!same && !row && !col && !one) {
    at.fail(str_cat(what, " is ", b.rows(), "x", b.cols(), "; it must be ", dst.rows(), "x",
                    dst.cols(), ", 1x", dst.cols(), ", ", dst.rows(), "x1 or 1x1"));
  }
}

// An operand the op does not take is refused: the vector unit loads every operand given, and
// the checks below look only at those the op reads (a fuzzed FILL with an `a` of no columns
// reached a memcpy to a null row).
bool check_operands_taken(const VectorCheck& at, const Vector& v, VectorOpClass cls) {
  const bool takes_a = cls != VectorOpClass::kFill;
  const bool takes_b = cls == VectorOpClass::kBinary || cls == VectorOpClass::kSelect;
  const bool takes_c = cls == VectorOpClass::kSelect;
  bool ok = true;
  for (const auto& [given, taken, name] :
       {std::tuple{v.has_a(), takes_a, "a"}, std::tuple{v.has_b(), takes_b, "b"},
        std::tuple{v.has_c(), takes_c, "c"}}) {
    if (given && !taken) {
      at.fail(str_cat("takes no operand ", name));
      ok = false;
    }
  }
  return ok;
}

void check_one(const VectorCheck& at, const Vector& v) {
  const VectorOpClass cls = classify(v.op());
  if (cls == VectorOpClass::kUnknown) {
    at.fail(str_cat("unknown vector op ", static_cast<int>(v.op())));
    return;
  }
  if (!at.vmem_block("dst", v.dst())) return;
  if (!check_operands_taken(at, v, cls)) return;
  const Block& dst = v.dst();
  if (cls != VectorOpClass::kCast && dst.dtype() != isa::F32) {
    at.fail("dst must be f32 (the vector unit computes in f32)");
  }
  auto need_a = [&](bool same_shape) {
    if (!v.has_a()) {
      at.fail("needs operand a");
      return false;
    }
    if (!at.vmem_block("a", v.a())) return false;
    if (same_shape && (v.a().rows() != dst.rows() || v.a().cols() != dst.cols())) {
      at.fail(str_cat("a is ", v.a().rows(), "x", v.a().cols(), " but dst is ", dst.rows(), "x",
                      dst.cols()));
      return false;
    }
    return true;
  };
  switch (cls) {
    case VectorOpClass::kBinary:
      if (need_a(true)) check_broadcastable(at, "b", v.b(), v.has_b(), dst);
      if (v.has_a() && v.a().dtype() != isa::F32) at.fail("a must be f32");
      break;
    case VectorOpClass::kUnary:
      if (need_a(true) && v.a().dtype() != isa::F32) at.fail("a must be f32");
      break;
    case VectorOpClass::kSelect:
      if (need_a(true)) {
        check_broadcastable(at, "b", v.b(), v.has_b(), dst);
        check_broadcastable(at, "c", v.c(), v.has_c(), dst);
        if (!v.has_b() || !v.has_c()) at.fail("select needs operands b and c");
      }
      break;
    case VectorOpClass::kCast:
      need_a(true);  // any of f32, bf16 and s32 to any other
      break;
    case VectorOpClass::kReduce:
      if (need_a(false)) {
        if (v.axis() > 1) at.fail(str_cat("axis ", v.axis(), "; reductions run along axis 0 or 1"));
        const uint32_t want_rows = v.axis() == 0 ? 1 : v.a().rows();
        const uint32_t want_cols = v.axis() == 0 ? v.a().cols() : 1;
        if (dst.rows() != want_rows || dst.cols() != want_cols) {
          at.fail(str_cat("reducing ", v.a().rows(), "x", v.a().cols(), " along axis ", v.axis(),
                          " gives ", want_rows, "x", want_cols, ", not ", dst.rows(), "x",
                          dst.cols()));
        }
      }
      break;
    case VectorOpClass::kTranspose:
      if (need_a(false) && (v.a().rows() != dst.cols() || v.a().cols() != dst.rows())) {
        at.fail(str_cat("transposing ", v.a().rows(), "x", v.a().cols(), " gives ", v.a().cols(),
                        "x", v.a().rows(), ", not ", dst.rows(), "x", dst.cols()));
      }
      break;
    case VectorOpClass::kBroadcast:
      if (need_a(false)) check_broadcastable(at, "a", v.a(), true, dst);
      break;
    case VectorOpClass::kFill:
    case VectorOpClass::kChain:  // routed to check_chain
    case VectorOpClass::kUnknown:
      break;
  }
}

// A CHAIN: at least one step and at most kMaxChainSteps, each a vector op a chain may take (not a
// transpose or a chain; an RNG may be, drawing its elements where the loop reads them), checked as
// an instruction of its own.
void check_chain(const VectorCheck& at, const Vector& v) {
  if (v.steps().empty()) {
    at.fail("is a chain of no steps");
    return;
  }
  if (v.in_register()) {
    at.fail("is a chain marked in_register (only its steps may be)");
    return;
  }
  if (v.steps_size() > kMaxChainSteps) {
    at.fail(str_cat("is a chain of ", v.steps_size(), " steps; at most ", kMaxChainSteps));
    return;
  }
  for (int i = 0; i < v.steps_size(); ++i) {
    const Vector& step = v.steps(i);
    const std::string prefix = str_cat("step ", i, " (", vector_op_name(step.op()), ") ");
    const VectorCheck step_at{
        [&](const char* what, const Block& b) { return at.vmem_block((prefix + what).c_str(), b); },
        [&](const std::string& reason) { at.fail(prefix + reason); }};
    if (step.op() == Vector::TRANSPOSE || step.op() == Vector::CHAIN || !step.steps().empty()) {
      step_at.fail("may not be a step of a chain (transposes and chains run alone)");
      continue;
    }
    check_one(step_at, step);
  }
}

}  // namespace

void check_vector_instruction(const Vector& v, const VectorCheck& at) {
  if (v.op() == Vector::CHAIN) {
    check_chain(at, v);
    return;
  }
  if (!v.steps().empty() || v.in_register()) {
    at.fail("has steps or in_register, which only a chain and its steps take");
    return;
  }
  check_one(at, v);
}

}  // namespace tpusim::sim
