#pragma once
// What one element of a gpu kernel computes: every op of the graph IR but matmul (cuBLAS) and
// cross_replica_sum (element::ring_sum_element) is one or more element launches, each a plain
// ElementPlan (built on the host by node_plan.h) and one thread per element calling
// eval_element. The same function runs on the host in the tests, so the index math and the
// order of every sum are checked against the cpu kernels without a GPU.
//
// Values are 4 bytes an element on the device: f32 (and bf16, held as f32 values bf16 can
// represent) as float, s32 as int32_t.

#include <cstdint>

#include "runtime/backend/element_math.h"

namespace tpusim::runtime::gpu {

enum class ElementKind : int {
  kBinary,          // out[e] = op(a[map_a(e)], b[map_b(e)]): numpy broadcasting
  kUnary,           // out[e] = op(a[e])
  kSelect,          // out[e] = cond[e] != 0 ? a[e] : b[e] (inputs cond, a, b)
  kCast,            // out[e] = a[e] converted (int_a: from s32; int_out: to s32)
  kReduce,          // out[e] = sum or max (op) of a[map_a(e) + map_b(k)], k = 0 .. inner-1
  kArgMax,          // out[e] = first k maximising a[(o * len + k) * inner + i], e = o * inner + i
  kGather,          // out[e] = a[map_a(e)]: transpose, broadcast, slice
  kScatter,         // out[map_a(e)] = a[e], e over the input: concat (one per part), pad
  kExtractPatches,  // im2col over NHWC, zero outside the image
  kPatchesToImage,  // each image element sums the patch elements that read it
  kOneHot,          // out[e] = a[e / inner] == e % inner (inner is the depth)
  kIndexGather,     // out[e] = a[clamp(b[e / inner], len) * inner + e % inner]: gather (a the
                    // [len, inner] table, b the s32 indices)
  kIndexScatterAdd,  // thread e < inner owns column e of the [len, inner] output (zeroed first):
                     // adds a[k * inner + e] to row clamp(b[k], len), k = 0 .. indices-1 in order
  kRngUniform,      // out[e] = counter_uniform(seed, step, e)
  kRoundBf16,       // out[e] = round_to_bf16(a[e]): bf16 outputs of a GEMM
  kToBf16Bits,      // out (uint16) [e] = bf16 encoding of a[e]: cuBLAS's CUDA_R_16BF inputs
};

struct PatchGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // the NHWC image
  int64_t oh = 0, ow = 0;              // output positions
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pad_top = 0, pad_left = 0;
};

// Trivially copyable: passed by value as a kernel parameter (well under its 4 KiB).
struct ElementPlan {
  ElementKind kind = ElementKind::kUnary;
  Op op = Op::kAdd;
  int64_t count = 0;  // elements launched: the output's, the input's for kScatter
  element::StridedMap map_a, map_b;
  int64_t inner = 0;  // kReduce: reduced elements per output; kArgMax: inner stride; kOneHot: depth
  int64_t len = 0;    // kArgMax: the axis's length; kIndex*: the table's rows
  int64_t indices = 0;  // kIndexScatterAdd: the index count
  bool int_a = false;         // input 0 holds s32 (kSelect: the condition)
  bool int_out = false;       // the output (and kSelect's branches) hold s32
  bool round_output = false;  // a DType::kBF16 output: round each result to bf16
  PatchGeometry patches;
  uint64_t seed = 0, step = 0;  // kRngUniform; `step` is set per step by the executor
};

namespace detail {

TPUSIM_HOST_DEVICE inline float load_float(const void* p, bool is_int, int64_t i) {
  return is_int ? static_cast<float>(static_cast<const int32_t*>(p)[i])
                : static_cast<const float*>(p)[i];
}

TPUSIM_HOST_DEVICE inline void copy_element(const void* from, int64_t i, void* to, int64_t o,
                                            bool is_int) {
  if (is_int) {
    static_cast<int32_t*>(to)[o] = static_cast<const int32_t*>(from)[i];
  } else {
    static_cast<float*>(to)[o] = static_cast<const float*>(from)[i];
  }
}

TPUSIM_HOST_DEVICE inline float finish(const ElementPlan& p, float v) {
  return p.round_output ? element::round_to_bf16(v) : v;
}

// The cpu kernels walk the input in row-major order and add each element to its output's
// double accumulator; one output's terms therefore arrive in row-major order of the reduced
// coordinates, which is the order map_b enumerates them here.
TPUSIM_HOST_DEVICE inline float reduce_element(const ElementPlan& p, const float* a, int64_t e) {
  const bool is_max = p.op == Op::kReduceMax;
  const int64_t base = element::strided_offset(p.map_a, e);
  double acc = is_max ? -static_cast<double>(INFINITY) : 0.0;
  for (int64_t k = 0; k < p.inner; ++k) {
    const double v = a[base + element::strided_offset(p.map_b, k)];
    acc = element::reduce_step(is_max, acc, v);
  }
  return static_cast<float>(acc);
}

TPUSIM_HOST_DEVICE inline int32_t argmax_element(const ElementPlan& p, const float* a, int64_t e) {
  const int64_t o = e / p.inner, i = e % p.inner;
  int64_t best = 0;
  float best_v = a[o * p.len * p.inner + i];
  for (int64_t k = 1; k < p.len; ++k) {
    const float v = a[(o * p.len + k) * p.inner + i];
    if (v > best_v) {  // the first maximum wins, as in TensorFlow
      best_v = v;
      best = k;
    }
  }
  return static_cast<int32_t>(best);
}

// Output [N, OH, OW, KH * KW * C]: element e is channel c of window tap (ky, kx) at (oy, ox).
TPUSIM_HOST_DEVICE inline float patch_element(const PatchGeometry& g, const float* x, int64_t e) {
  const int64_t c = e % g.c;
  int64_t t = e / g.c;
  const int64_t kx = t % g.kw;
  t /= g.kw;
  const int64_t ky = t % g.kh;
  t /= g.kh;
  const int64_t ox = t % g.ow;
  t /= g.ow;
  const int64_t oy = t % g.oh;
  const int64_t b = t / g.oh;
  const int64_t y = oy * g.sh + ky - g.pad_top, xx = ox * g.sw + kx - g.pad_left;
  if (y < 0 || y >= g.h || xx < 0 || xx >= g.w) return 0.0f;  // zero padding
  return x[((b * g.h + y) * g.w + xx) * g.c + c];
}

// Image element e (NHWC) sums, in f32 and in the cpu kernel's order (window positions
// (oy, ox) ascending), every patch element that extract_patches copied from it.
TPUSIM_HOST_DEVICE inline float image_element(const PatchGeometry& g, const float* p, int64_t e) {
  const int64_t c = e % g.c;
  int64_t t = e / g.c;
  const int64_t xx = t % g.w;
  t /= g.w;
  const int64_t y = t % g.h;
  const int64_t b = t / g.h;
  const int64_t row = g.kh * g.kw * g.c;
  float acc = 0.0f;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const int64_t ky = y + g.pad_top - oy * g.sh;
    if (ky < 0 || ky >= g.kh) continue;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t kx = xx + g.pad_left - ox * g.sw;
      if (kx < 0 || kx >= g.kw) continue;
      acc += p[((b * g.oh + oy) * g.ow + ox) * row + (ky * g.kw + kx) * g.c + c];
    }
  }
  return acc;
}

// Column e of scatter_add's output: every update in index order, in f32 (the cpu kernel's sums,
// one thread per column so no two threads touch an element), then rounded once for bf16.
TPUSIM_HOST_DEVICE inline void scatter_add_column(const ElementPlan& p, const float* updates,
                                                  const int32_t* indices, float* out, int64_t e) {
  for (int64_t k = 0; k < p.indices; ++k)
    out[element::clamp_index(indices[k], p.len) * p.inner + e] += updates[k * p.inner + e];
  if (!p.round_output) return;
  for (int64_t r = 0; r < p.len; ++r)
    out[r * p.inner + e] = element::round_to_bf16(out[r * p.inner + e]);
}

}  // namespace detail

// Computes element e of `p` from inputs a, b, c (as many as the kind reads) into `out`.
TPUSIM_HOST_DEVICE inline void eval_element(const ElementPlan& p, const void* a, const void* b,
                                            const void* c, void* out, int64_t e) {
  float* out_f = static_cast<float*>(out);
  int32_t* out_i = static_cast<int32_t*>(out);
  const float* a_f = static_cast<const float*>(a);
  switch (p.kind) {
    case ElementKind::kBinary:
      out_f[e] = detail::finish(
          p, element::apply_binary(
                 p.op, detail::load_float(a, p.int_a, element::strided_offset(p.map_a, e)),
                 detail::load_float(b, p.int_a, element::strided_offset(p.map_b, e))));
      break;
    case ElementKind::kUnary:
      out_f[e] = detail::finish(p, element::apply_unary(p.op, a_f[e]));
      break;
    case ElementKind::kSelect: {
      const bool take = p.int_a ? static_cast<const int32_t*>(a)[e] != 0 : a_f[e] != 0.0f;
      detail::copy_element(take ? b : c, e, out, e, p.int_out);
      break;
    }
    case ElementKind::kCast:
      if (p.int_out) {
        out_i[e] = p.int_a ? static_cast<const int32_t*>(a)[e] : element::f32_to_s32(a_f[e]);
      } else {
        out_f[e] = detail::finish(p, detail::load_float(a, p.int_a, e));
      }
      break;
    case ElementKind::kReduce:
      out_f[e] = detail::finish(p, detail::reduce_element(p, a_f, e));
      break;
    case ElementKind::kArgMax:
      out_i[e] = detail::argmax_element(p, a_f, e);
      break;
    case ElementKind::kGather:
      detail::copy_element(a, element::strided_offset(p.map_a, e), out, e, p.int_out);
      break;
    case ElementKind::kScatter:
      detail::copy_element(a, e, out, element::strided_offset(p.map_a, e), p.int_out);
      break;
    case ElementKind::kExtractPatches:
      out_f[e] = detail::patch_element(p.patches, a_f, e);
      break;
    case ElementKind::kPatchesToImage:
      out_f[e] = detail::finish(p, detail::image_element(p.patches, a_f, e));
      break;
    case ElementKind::kOneHot: {
      const int32_t label = static_cast<const int32_t*>(a)[e / p.inner];
      out_f[e] = label == e % p.inner ? 1.0f : 0.0f;  // out of range: all zeros, as TF
      break;
    }
    case ElementKind::kIndexGather: {
      const int64_t row = element::clamp_index(static_cast<const int32_t*>(b)[e / p.inner], p.len);
      out_f[e] = a_f[row * p.inner + e % p.inner];  // a copy: bf16 values stay bf16 values
      break;
    }
    case ElementKind::kIndexScatterAdd:
      detail::scatter_add_column(p, a_f, static_cast<const int32_t*>(b), out_f, e);
      break;
    case ElementKind::kRngUniform:
      out_f[e] = element::counter_uniform(p.seed, p.step, static_cast<uint64_t>(e));
      break;
    case ElementKind::kRoundBf16:
      out_f[e] = element::round_to_bf16(a_f[e]);
      break;
    case ElementKind::kToBf16Bits:
      static_cast<uint16_t*>(out)[e] = element::f32_to_bf16_bits(a_f[e]);
      break;
  }
}

}  // namespace tpusim::runtime::gpu
