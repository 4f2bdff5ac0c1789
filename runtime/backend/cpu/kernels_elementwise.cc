#include <type_traits>

#include "runtime/backend/cpu/buffers.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/walk.h"
#include "runtime/backend/element_math.h"

namespace tpusim::runtime::cpu {

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out_shape,
                                       const std::vector<int64_t>& map) {
  std::vector<int64_t> strides(static_cast<size_t>(out_shape.rank()), 0);
  const std::vector<int64_t> in_strides = shape.strides();
  for (size_t i = 0; i < map.size(); ++i) {
    if (shape.dim(static_cast<int>(i)) != 1) strides[static_cast<size_t>(map[i])] = in_strides[i];
  }
  return strides;
}

namespace {

// Input dim i of a numpy-broadcast operand sits at output dim (out rank - in rank + i).
std::vector<int64_t> numpy_map(const Shape& in, const Shape& out) {
  std::vector<int64_t> map(static_cast<size_t>(in.rank()));
  for (int i = 0; i < in.rank(); ++i) map[static_cast<size_t>(i)] = out.rank() - in.rank() + i;
  return map;
}

// Calls f(op) with `op` a compile-time constant (std::integral_constant) where it is one of the
// binary elementwise ops, so that element::apply_binary's switch folds out of the kernel's
// loop; any other op passes as it is.
template <typename F>
void with_binary_op(Op op, F f) {
  switch (op) {
    case Op::kAdd:
      return f(std::integral_constant<Op, Op::kAdd>{});
    case Op::kSub:
      return f(std::integral_constant<Op, Op::kSub>{});
    case Op::kMul:
      return f(std::integral_constant<Op, Op::kMul>{});
    case Op::kDiv:
      return f(std::integral_constant<Op, Op::kDiv>{});
    case Op::kMax:
      return f(std::integral_constant<Op, Op::kMax>{});
    case Op::kMin:
      return f(std::integral_constant<Op, Op::kMin>{});
    case Op::kEqual:
      return f(std::integral_constant<Op, Op::kEqual>{});
    case Op::kGreater:
      return f(std::integral_constant<Op, Op::kGreater>{});
    default:
      return f(op);
  }
}

// The same for the unary ops (element::apply_unary).
template <typename F>
void with_unary_op(Op op, F f) {
  switch (op) {
    case Op::kNeg:
      return f(std::integral_constant<Op, Op::kNeg>{});
    case Op::kRelu:
      return f(std::integral_constant<Op, Op::kRelu>{});
    case Op::kTanh:
      return f(std::integral_constant<Op, Op::kTanh>{});
    case Op::kSigmoid:
      return f(std::integral_constant<Op, Op::kSigmoid>{});
    case Op::kExp:
      return f(std::integral_constant<Op, Op::kExp>{});
    case Op::kLog:
      return f(std::integral_constant<Op, Op::kLog>{});
    case Op::kRsqrt:
      return f(std::integral_constant<Op, Op::kRsqrt>{});
    case Op::kErf:
      return f(std::integral_constant<Op, Op::kErf>{});
    case Op::kSquare:
      return f(std::integral_constant<Op, Op::kSquare>{});
    default:
      return f(op);
  }
}

// One row of a broadcasting binary op. Rows whose operands step by 1 or stay put (a bias over
// channels, a statistic over a row) run as plain loops the compiler vectorizes; each element is
// the same single operation either way.
template <typename OpT>
void binary_row(OpT op, const Row& r, const float* xa, const float* xb, float* y) {
  const float* a = xa + r.ia;
  const float* b = xb + r.ib;
  float* out = y + r.k;
  if (r.step_a == 1 && r.step_b == 1) {
    for (int64_t j = 0; j < r.count; ++j) out[j] = element::apply_binary(op, a[j], b[j]);
  } else if (r.step_a == 1 && r.step_b == 0) {
    const float bv = *b;
    for (int64_t j = 0; j < r.count; ++j) out[j] = element::apply_binary(op, a[j], bv);
  } else if (r.step_a == 0 && r.step_b == 1) {
    const float av = *a;
    for (int64_t j = 0; j < r.count; ++j) out[j] = element::apply_binary(op, av, b[j]);
  } else {
    for (int64_t j = 0; j < r.count; ++j)
      out[j] = element::apply_binary(op, a[j * r.step_a], b[j * r.step_b]);
  }
}

}  // namespace

void round_all_to_bf16(std::vector<float>& values) {
  for (float& v : values) v = element::round_to_bf16(v);
}

HostTensor elementwise_binary(const Node& n, const Inputs& in, const BinaryOperands& operands) {
  const HostTensor& a = *in[0];
  const HostTensor& b = *in[1];
  HostTensor out = new_tensor(DType::kF32, n.shape, Init::kOverwritten);
  out.dtype = n.dtype;
  auto strides = [&](const HostTensor& t, const std::vector<int64_t>& map) {
    return broadcast_strides(t.shape, n.shape, map.empty() ? numpy_map(t.shape, n.shape) : map);
  };
  const auto sa = strides(a, operands.map[0]);
  const auto sb = strides(b, operands.map[1]);
  float* y = out.f.data();
  if (a.dtype == DType::kS32) {  // comparisons of integers
    with_binary_op(n.op, [&](auto op) {
      walk_indices(n.shape, sa, 0, sb, 0, [&](int64_t o, int64_t ia, int64_t ib) {
        y[o] = element::apply_binary(op, static_cast<float>(a.i[static_cast<size_t>(ia)]),
                                     static_cast<float>(b.i[static_cast<size_t>(ib)]));
      });
    });
    return out;
  }
  const float* xa = a.f.data();
  const float* xb = b.f.data();
  with_binary_op(n.op, [&](auto op) {
    if (a.shape == n.shape && b.shape == n.shape && operands.map[0].empty() &&
        operands.map[1].empty()) {
      const int64_t count = n.shape.elements();
#pragma omp parallel for if (count > 65536)
      for (int64_t i = 0; i < count; ++i) y[i] = element::apply_binary(op, xa[i], xb[i]);
    } else {
      parallel_walk_rows(n.shape, sa, 0, sb, 0,
                         [&](const Row& r) { binary_row(op, r, xa, xb, y); });
    }
  });
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

HostTensor elementwise_unary(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  if (n.op == Op::kStopGradient || n.op == Op::kCrossReplicaSum) return a;
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  const int64_t count = a.elements();
  float* y = out.f.data();
  const float* x = a.f.data();
  with_unary_op(n.op, [&](auto op) {
#pragma omp parallel for if (count > 65536)
    for (int64_t i = 0; i < count; ++i) y[i] = element::apply_unary(op, x[i]);
  });
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

HostTensor select(const Node& n, const Inputs& in) {
  const HostTensor& c = *in[0];
  HostTensor out = *in[2];
  const HostTensor& a = *in[1];
  for (int64_t i = 0; i < n.shape.elements(); ++i) {
    const size_t u = static_cast<size_t>(i);
    const bool take = c.dtype == DType::kS32 ? c.i[u] != 0 : c.f[u] != 0.0f;
    if (out.dtype == DType::kS32) {
      if (take) out.i[u] = a.i[u];
    } else if (take) {
      out.f[u] = a.f[u];
    }
  }
  return out;
}

HostTensor cast(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  const size_t count = static_cast<size_t>(n.shape.elements());
  if (n.dtype == DType::kS32) {
    for (size_t i = 0; i < count; ++i)
      out.i[i] = a.dtype == DType::kS32 ? a.i[i] : element::f32_to_s32(a.f[i]);
  } else {
    for (size_t i = 0; i < count; ++i)
      out.f[i] = a.dtype == DType::kS32 ? static_cast<float>(a.i[i]) : a.f[i];
    if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  }
  return out;
}

HostTensor one_hot(const Node& n, const Inputs& in) {
  const HostTensor& labels = *in[0];
  HostTensor out = new_tensor(DType::kF32, n.shape);
  const int64_t depth = n.attrs.depth;
  for (size_t i = 0; i < labels.i.size(); ++i) {
    const int32_t l = labels.i[i];
    if (l >= 0 && l < depth)
      out.f[i * static_cast<size_t>(depth) + static_cast<size_t>(l)] =
          1.0f;  // out of range: all zeros, as TF
  }
  return out;
}

HostTensor rng_uniform(const Node& n, const KernelContext& ctx) {
  HostTensor out = new_tensor(DType::kF32, n.shape, Init::kOverwritten);
  for (size_t i = 0; i < out.f.size(); ++i)
    out.f[i] = element::counter_uniform(n.attrs.seed, ctx.step, i);
  return out;
}

HostTensor ring_sum(const std::vector<const HostTensor*>& replicas) {
  HostTensor out = *replicas.front();
  const size_t k = replicas.size();
  const auto n = static_cast<size_t>(out.elements());
  if (out.dtype == DType::kS32) {
    std::vector<const int32_t*> parts;
    for (const HostTensor* r : replicas) parts.push_back(r->i.data());
    for (size_t i = 0; i < n; ++i) out.i[i] = element::ring_sum_element(parts.data(), k, n, i);
  } else {
    std::vector<const float*> parts;
    for (const HostTensor* r : replicas) parts.push_back(r->f.data());
    for (size_t i = 0; i < n; ++i) out.f[i] = element::ring_sum_element(parts.data(), k, n, i);
  }
  return out;
}

}  // namespace tpusim::runtime::cpu
