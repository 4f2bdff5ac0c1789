#include <algorithm>
#include <limits>

#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/element_math.h"

namespace tpusim::runtime::cpu {
namespace {

// Calls f(out_linear, in_linear) for every output element, the input index advancing by
// `in_strides` per output dimension (an odometer: no division per element).
template <typename F>
void walk(const Shape& out, const std::vector<int64_t>& in_strides, int64_t in_base, F f) {
  const int rank = out.rank();
  const int64_t n = out.elements();
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t in = in_base;
  for (int64_t o = 0; o < n; ++o) {
    f(o, in);
    for (int d = rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++idx[du];
      in += in_strides[du];
      if (idx[du] < out.dim(d)) break;
      in -= in_strides[du] * idx[du];
      idx[du] = 0;
    }
  }
}

template <typename F>
void copy_values(const HostTensor& from, HostTensor* to, F index_map_walk) {
  if (from.dtype == DType::kS32) {
    index_map_walk([&](int64_t o, int64_t i) {
      to->i[static_cast<size_t>(o)] = from.i[static_cast<size_t>(i)];
    });
  } else {
    index_map_walk([&](int64_t o, int64_t i) {
      to->f[static_cast<size_t>(o)] = from.f[static_cast<size_t>(i)];
    });
  }
}

// The other direction: `index_map_walk` visits (index in `from`, index in `to`) pairs and each
// element of `from` lands in `to` (concat, pad).
template <typename F>
void scatter_values(const HostTensor& from, HostTensor* to, F index_map_walk) {
  copy_values(from, to, [&](auto gather) {
    index_map_walk([&](int64_t from_index, int64_t to_index) { gather(to_index, from_index); });
  });
}

// Linear offset of the element at `begin` under `strides`.
int64_t start_offset(const std::vector<int64_t>& begin, const std::vector<int64_t>& strides) {
  int64_t base = 0;
  for (size_t d = 0; d < strides.size(); ++d) base += begin[d] * strides[d];
  return base;
}

}  // namespace

HostTensor reduce(const Node& n, const Inputs& in, const KernelContext& ctx) {
  const HostTensor& a = *in[0];
  const Shape& s = a.shape;
  // Strides that map an input index to its output index (0 along reduced axes).
  std::vector<int64_t> to_out(static_cast<size_t>(s.rank()), 0);
  const auto out_strides = n.shape.strides();
  for (int d = 0, o = 0; d < s.rank(); ++d) {
    if (std::find(n.attrs.axes.begin(), n.attrs.axes.end(), d) == n.attrs.axes.end()) {
      to_out[static_cast<size_t>(d)] = out_strides[static_cast<size_t>(o++)];
    }
  }
  const bool is_max = n.op == Op::kReduceMax;
  HostTensor out = HostTensor::zeros(n.dtype, n.shape);
  if (ctx.f32_reductions && !is_max) {  // in f32, in the same order
    std::vector<float> acc(static_cast<size_t>(n.shape.elements()), 0.0f);
    walk(s, to_out, 0, [&](int64_t i, int64_t o) {
      acc[static_cast<size_t>(o)] += a.f[static_cast<size_t>(i)];
    });
    std::copy(acc.begin(), acc.end(), out.f.begin());
    if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
    return out;
  }
  // In double, term by term as the gpu kernels sum (element::reduce_step).
  std::vector<double> acc(static_cast<size_t>(n.shape.elements()),
                          is_max ? -std::numeric_limits<double>::infinity() : 0.0);
  walk(s, to_out, 0, [&](int64_t i, int64_t o) {
    double& slot = acc[static_cast<size_t>(o)];
    slot = element::reduce_step(is_max, slot, a.f[static_cast<size_t>(i)]);
  });
  for (size_t i = 0; i < acc.size(); ++i) out.f[i] = static_cast<float>(acc[i]);
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

HostTensor argmax(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  const int64_t axis = n.attrs.axis;
  const int64_t len = a.shape.dim(static_cast<int>(axis));
  const int64_t inner = a.shape.strides()[static_cast<size_t>(axis)];
  const int64_t outer = a.shape.elements() / (len * inner);
  HostTensor out = HostTensor::zeros(DType::kS32, n.shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      float best_v = a.f[static_cast<size_t>(o * len * inner + i)];
      for (int64_t k = 1; k < len; ++k) {
        const float v = a.f[static_cast<size_t>((o * len + k) * inner + i)];
        if (v > best_v) {  // the first maximum wins, as in TensorFlow
          best_v = v;
          best = k;
        }
      }
      out.i[static_cast<size_t>(o * inner + i)] = static_cast<int32_t>(best);
    }
  }
  return out;
}

HostTensor transpose(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = HostTensor::zeros(a.dtype, n.shape);
  const auto s = a.shape.strides();
  std::vector<int64_t> in_strides;
  for (int64_t p : n.attrs.axes) in_strides.push_back(s[static_cast<size_t>(p)]);
  copy_values(a, &out, [&](auto f) { walk(n.shape, in_strides, 0, f); });
  return out;
}

HostTensor broadcast(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = HostTensor::zeros(a.dtype, n.shape);
  const auto strides = broadcast_strides(a.shape, n.shape, n.attrs.axes);
  copy_values(a, &out, [&](auto f) { walk(n.shape, strides, 0, f); });
  return out;
}

HostTensor concat(const Node& n, const Inputs& in) {
  HostTensor out = HostTensor::zeros(n.dtype, n.shape);
  const auto out_strides = n.shape.strides();
  int64_t offset = 0;
  for (const HostTensor* part : in) {
    // Walk the part; its element lands at the same index shifted along the axis.
    scatter_values(*part, &out, [&](auto f) {
      walk(part->shape, out_strides, offset * out_strides[static_cast<size_t>(n.attrs.axis)], f);
    });
    offset += part->shape.dim(static_cast<int>(n.attrs.axis));
  }
  return out;
}

HostTensor slice(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = HostTensor::zeros(a.dtype, n.shape);
  const auto s = a.shape.strides();
  const int64_t base = start_offset(n.attrs.begin, s);
  copy_values(a, &out, [&](auto f) { walk(n.shape, s, base, f); });
  return out;
}

HostTensor pad(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = HostTensor::zeros(a.dtype, n.shape);
  const auto s = n.shape.strides();
  const int64_t base = start_offset(n.attrs.begin, s);
  // Walk the input; each element lands in the padded output.
  scatter_values(a, &out, [&](auto f) { walk(a.shape, s, base, f); });
  return out;
}

HostTensor extract_patches(const Node& n, const Inputs& in) {
  const HostTensor& x = *in[0];
  const Window& w = n.attrs.window;
  const int64_t N = x.shape.dim(0), H = x.shape.dim(1), W = x.shape.dim(2), C = x.shape.dim(3);
  const int64_t OH = n.shape.dim(1), OW = n.shape.dim(2);
  HostTensor out = HostTensor::zeros(x.dtype, n.shape);
#pragma omp parallel for collapse(2) if (N * OH > 16)
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        float* dst = out.f.data() + ((b * OH + oy) * OW + ox) * w.kh * w.kw * C;
        for (int64_t ky = 0; ky < w.kh; ++ky) {
          const int64_t y = oy * w.sh + ky - w.pad_top;
          for (int64_t kx = 0; kx < w.kw; ++kx, dst += C) {
            const int64_t xx = ox * w.sw + kx - w.pad_left;
            if (y < 0 || y >= H || xx < 0 || xx >= W) continue;  // zero padding
            const float* src = x.f.data() + ((b * H + y) * W + xx) * C;
            std::copy(src, src + C, dst);
          }
        }
      }
    }
  }
  return out;
}

HostTensor patches_to_image(const Node& n, const Inputs& in) {
  const HostTensor& p = *in[0];
  const Window& w = n.attrs.window;
  const int64_t N = n.shape.dim(0), H = n.shape.dim(1), W = n.shape.dim(2), C = n.shape.dim(3);
  const int64_t OH = p.shape.dim(1), OW = p.shape.dim(2);
  HostTensor out = HostTensor::zeros(p.dtype, n.shape);
  // Sequential per image, in a fixed order: overlapping windows add up reproducibly.
#pragma omp parallel for if (N > 1)
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        const float* src = p.f.data() + ((b * OH + oy) * OW + ox) * w.kh * w.kw * C;
        for (int64_t ky = 0; ky < w.kh; ++ky) {
          const int64_t y = oy * w.sh + ky - w.pad_top;
          for (int64_t kx = 0; kx < w.kw; ++kx, src += C) {
            const int64_t xx = ox * w.sw + kx - w.pad_left;
            if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
            float* dst = out.f.data() + ((b * H + y) * W + xx) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
          }
        }
      }
    }
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

}  // namespace tpusim::runtime::cpu
