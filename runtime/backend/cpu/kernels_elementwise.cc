#include "runtime/backend/cpu/kernels.h"
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

// Calls f(out_index, a_index, b_index) over an output, walking operands by broadcast strides.
template <typename F>
void for_each_broadcast(const Shape& out, const std::vector<int64_t>& sa,
                        const std::vector<int64_t>& sb, F f) {
  const int rank = out.rank();
  const int64_t n = out.elements();
  if (rank == 0) {
    if (n == 1) f(0, 0, 0);
    return;
  }
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < n; ++o) {
    f(o, ia, ib);
    for (int d = rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++idx[du];
      ia += sa[du];
      ib += sb[du];
      if (idx[du] < out.dim(d)) break;
      ia -= sa[du] * idx[du];
      ib -= sb[du] * idx[du];
      idx[du] = 0;
    }
  }
}

}  // namespace

void round_all_to_bf16(std::vector<float>& values) {
  for (float& v : values) v = element::round_to_bf16(v);
}

HostTensor elementwise_binary(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  const HostTensor& b = *in[1];
  HostTensor out = HostTensor::zeros(DType::kF32, n.shape);
  out.dtype = n.dtype;
  const auto sa = broadcast_strides(a.shape, n.shape, numpy_map(a.shape, n.shape));
  const auto sb = broadcast_strides(b.shape, n.shape, numpy_map(b.shape, n.shape));
  if (a.dtype == DType::kS32) {  // comparisons of integers
    for_each_broadcast(n.shape, sa, sb, [&](int64_t o, int64_t ia, int64_t ib) {
      out.f[static_cast<size_t>(o)] =
          element::apply_binary(n.op, static_cast<float>(a.i[static_cast<size_t>(ia)]),
                                static_cast<float>(b.i[static_cast<size_t>(ib)]));
    });
    return out;
  }
  if (a.shape == n.shape && b.shape == n.shape) {
    const int64_t count = n.shape.elements();
#pragma omp parallel for if (count > 65536)
    for (int64_t i = 0; i < count; ++i)
      out.f[static_cast<size_t>(i)] =
          element::apply_binary(n.op, a.f[static_cast<size_t>(i)], b.f[static_cast<size_t>(i)]);
  } else {
    for_each_broadcast(n.shape, sa, sb, [&](int64_t o, int64_t ia, int64_t ib) {
      out.f[static_cast<size_t>(o)] =
          element::apply_binary(n.op, a.f[static_cast<size_t>(ia)], b.f[static_cast<size_t>(ib)]);
    });
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

HostTensor elementwise_unary(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = a;
  if (n.op == Op::kStopGradient || n.op == Op::kCrossReplicaSum) return out;
  const int64_t count = a.elements();
  float* y = out.f.data();
  const float* x = a.f.data();
#pragma omp parallel for if (count > 65536)
  for (int64_t i = 0; i < count; ++i) y[i] = element::apply_unary(n.op, x[i]);
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
  HostTensor out = HostTensor::zeros(n.dtype, n.shape);
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
  HostTensor out = HostTensor::zeros(DType::kF32, n.shape);
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
  HostTensor out = HostTensor::zeros(DType::kF32, n.shape);
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
