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
  kBinary,           // out[e] = op(a[map_a(e)], b[map_b(e)]): numpy broadcasting
  kUnary,            // out[e] = op(a[e])
  kSelect,           // out[e] = cond[e] != 0 ? a[e] : b[e] (inputs cond, a, b)
  kCast,             // out[e] = a[e] converted (int_a: from s32; int_out: to s32)
  kReduce,           // out[e] = sum or max (op) of a[map_a(e) + map_b(k)], k = 0 .. inner-1, on one
                     // thread: a reduction of at most element::kReduceBlock terms
  kReducePartial,    // out (double) [e] = block j's sum of output o, e = j * outputs + o: the
                     // first level of a longer reduction's tree (element_math.h), each block on a
                     // thread of its own (count = outputs x blocks)
  kReduceCombine,    // out (double) [e] = the sum of group g of the level a (double) holds, e =
                     // g * len + o: a (double) [i * len + o], i in group g of `blocks` entries
  kReduceFinish,     // out[e] = the sum or max of a (double) [j * count + e], j = 0 .. blocks-1:
                     // the tree's last level (at most kReduceBlock entries)
  kArgMax,           // out[e] = first k maximising a[(o * len + k) * inner + i], e = o * inner + i
  kGather,           // out[e] = a[map_a(e)]: broadcast, slice, a transpose that keeps the last axis
  kTranspose,        // out[e] = a[map_a(e)], the output [batches, cols, rows] of an input [batches,
                     // rows, cols] (len = rows, inner = cols): on the GPU a tiled kernel, whose
                     // reads and writes both run along memory
  kScatter,          // out[map_a(e)] = a[e], e over the input: concat (one per part), pad
  kExtractPatches,   // im2col over NHWC, zero outside the image
  kPatchesToImage,   // each image element sums the patch elements that read it
  kOneHot,           // out[e] = a[e / inner] == e % inner (inner is the depth)
  kIndexGather,      // out[e] = a[clamp(b[e / inner], len) * inner + e % inner]: gather (a the
                     // [len, inner] table, b the s32 indices)
  kIndexScatterAdd,  // thread e < inner owns column e of the [len, inner] output (zeroed first):
                     // adds a[k * inner + e] to row clamp(b[k], len), k = 0 .. indices-1 in order
  kRngUniform,       // out[e] = counter_uniform(seed, step, e)
  kRoundBf16,        // out[e] = round_to_bf16(a[e]): bf16 outputs of a GEMM
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
  int64_t indices = 0;   // kIndexScatterAdd: the index count
  int64_t blocks = 1;    // kReducePartial: the first level's blocks; kReduceCombine, kReduceFinish:
                         // the entries of the level they read
  bool int_a = false;    // input 0 holds s32 (kSelect: the condition)
  bool int_out = false;  // the output (and kSelect's branches) hold s32
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

// Block j (terms j x kReduceBlock onwards) of output e's reduction, from the reduction's start;
// the terms in row-major order of the reduced coordinates, as map_b enumerates them.
TPUSIM_HOST_DEVICE inline double reduce_block(const ElementPlan& p, const float* a, int64_t e,
                                              int64_t j) {
  const bool is_max = p.op == Op::kReduceMax;
  const int64_t base = element::strided_offset(p.map_a, e);
  const int64_t first = j * element::kReduceBlock;
  const int64_t last =
      first + element::kReduceBlock < p.inner ? first + element::kReduceBlock : p.inner;
  double acc = element::reduce_start(is_max);
  for (int64_t k = first; k < last; ++k) {
    const double v = a[base + element::strided_offset(p.map_b, k)];
    acc = element::reduce_step(is_max, acc, v);
  }
  return acc;
}

// A reduction of at most kReduceBlock terms: its one block.
TPUSIM_HOST_DEVICE inline float reduce_element(const ElementPlan& p, const float* a, int64_t e) {
  return static_cast<float>(reduce_block(p, a, e, 0));
}

// Group g of a tree level of p.blocks entries for each of p.len outputs (entry i of output o at
// i * p.len + o), summed in order from the start.
TPUSIM_HOST_DEVICE inline double reduce_group(const ElementPlan& p, const double* level, int64_t o,
                                              int64_t g) {
  const bool is_max = p.op == Op::kReduceMax;
  const int64_t first = g * element::kReduceBlock;
  const int64_t last =
      first + element::kReduceBlock < p.blocks ? first + element::kReduceBlock : p.blocks;
  double acc = element::reduce_start(is_max);
  for (int64_t i = first; i < last; ++i)
    acc = element::reduce_step(is_max, acc, level[i * p.len + o]);
  return acc;
}

TPUSIM_HOST_DEVICE inline float reduce_finish(const ElementPlan& p, const double* partials,
                                              int64_t e) {
  const bool is_max = p.op == Op::kReduceMax;
  double acc = element::reduce_start(is_max);
  for (int64_t j = 0; j < p.blocks; ++j)
    acc = element::reduce_step(is_max, acc, partials[j * p.count + e]);
  return static_cast<float>(acc);
}

TPUSIM_HOST_DEVICE inline int32_t argmax_element(const ElementPlan& p, const float* a, int64_t e) {
  const int64_t o = e / p.inner, i = e % p.inner;
  // The first NaN, else the first maximum, as XLA's argmax.
  return static_cast<int32_t>(sim::nan_argmax(a + o * p.len * p.inner + i, p.len, p.inner));
}

// Output [N, OH, OW, KH * KW * C]: element e is channel c of window tap (ky, kx) at (oy, ox);
// where in the image it copies from, or -1 for the zero padding. I is the index type: 32-bit
// where every index fits (a GPU has no 64-bit divider).
template <typename I>
TPUSIM_HOST_DEVICE inline int64_t patch_source(const PatchGeometry& g, I e) {
  const I c = e % static_cast<I>(g.c);
  I t = e / static_cast<I>(g.c);
  const I kx = t % static_cast<I>(g.kw);
  t /= static_cast<I>(g.kw);
  const I ky = t % static_cast<I>(g.kh);
  t /= static_cast<I>(g.kh);
  const I ox = t % static_cast<I>(g.ow);
  t /= static_cast<I>(g.ow);
  const I oy = t % static_cast<I>(g.oh);
  const I b = t / static_cast<I>(g.oh);
  const int64_t y = static_cast<int64_t>(oy) * g.sh + ky - g.pad_top;
  const int64_t xx = static_cast<int64_t>(ox) * g.sw + kx - g.pad_left;
  if (y < 0 || y >= g.h || xx < 0 || xx >= g.w) return -1;
  return ((static_cast<int64_t>(b) * g.h + y) * g.w + xx) * g.c + c;
}

template <typename I>
TPUSIM_HOST_DEVICE inline float patch_element(const PatchGeometry& g, const float* x, I e) {
  const int64_t from = patch_source(g, e);
  return from < 0 ? 0.0f : x[from];
}

// Image elements e .. e + L-1 (NHWC; L channels of one pixel, so C is a multiple of L) each
// sum, in f32 and in the cpu kernel's order (window positions (oy, ox) ascending), every patch
// element that extract_patches copied from them.
template <typename I, int L>
TPUSIM_HOST_DEVICE inline void image_elements(const PatchGeometry& g, const float* p, I e,
                                              float (&acc)[L]) {
  const int64_t c = e % static_cast<I>(g.c);
  I t = e / static_cast<I>(g.c);
  const int64_t xx = t % static_cast<I>(g.w);
  t /= static_cast<I>(g.w);
  const int64_t y = t % static_cast<I>(g.h);
  const int64_t b = t / static_cast<I>(g.h);
  const int64_t row = g.kh * g.kw * g.c;
  for (int l = 0; l < L; ++l) acc[l] = 0.0f;
  // Only the window positions whose taps can reach (y, xx): the same positions in the same
  // order as a walk over all of them that skips the rest.
  const int64_t y0 = y + g.pad_top, x0 = xx + g.pad_left;
  const int64_t oy_first = y0 - g.kh + 1 > 0 ? (y0 - g.kh + g.sh) / g.sh : 0;
  const int64_t ox_first = x0 - g.kw + 1 > 0 ? (x0 - g.kw + g.sw) / g.sw : 0;
  const int64_t oy_end = y0 / g.sh + 1 < g.oh ? y0 / g.sh + 1 : g.oh;
  const int64_t ox_end = x0 / g.sw + 1 < g.ow ? x0 / g.sw + 1 : g.ow;
  for (int64_t oy = oy_first; oy < oy_end; ++oy) {
    const int64_t ky = y0 - oy * g.sh;
    if (ky < 0 || ky >= g.kh) continue;
    for (int64_t ox = ox_first; ox < ox_end; ++ox) {
      const int64_t kx = x0 - ox * g.sw;
      if (kx < 0 || kx >= g.kw) continue;
      const float* from = p + ((b * g.oh + oy) * g.ow + ox) * row + (ky * g.kw + kx) * g.c + c;
      for (int l = 0; l < L; ++l) acc[l] += from[l];
    }
  }
}

template <typename I>
TPUSIM_HOST_DEVICE inline float image_element(const PatchGeometry& g, const float* p, I e) {
  float acc[1];
  image_elements<I, 1>(g, p, e, acc);
  return acc[0];
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

// Whether every index of `p`'s elements fits 32 bits: its count, and through it the patch and
// image geometry it walks.
TPUSIM_HOST_DEVICE inline bool fits_32_bits(const ElementPlan& p) {
  return p.count <= 0x7fffffffLL;
}

// Element e of a kind K plan (p.kind == K): each kernel is instantiated for one kind, so a
// GPU thread carries no other kind's code or registers.
template <ElementKind K>
TPUSIM_HOST_DEVICE inline void eval_kind(const ElementPlan& p, const void* a, const void* b,
                                         const void* c, void* out, int64_t e) {
  float* out_f = static_cast<float*>(out);
  int32_t* out_i = static_cast<int32_t*>(out);
  const float* a_f = static_cast<const float*>(a);
  if constexpr (K == ElementKind::kBinary) {
    out_f[e] = detail::finish(
        p, element::apply_binary(
               p.op, detail::load_float(a, p.int_a, element::strided_offset(p.map_a, e)),
               detail::load_float(b, p.int_a, element::strided_offset(p.map_b, e))));
  } else if constexpr (K == ElementKind::kUnary) {
    out_f[e] = detail::finish(p, element::apply_unary(p.op, a_f[e]));
  } else if constexpr (K == ElementKind::kSelect) {
    const bool take = p.int_a ? static_cast<const int32_t*>(a)[e] != 0 : a_f[e] != 0.0f;
    detail::copy_element(take ? b : c, e, out, e, p.int_out);
  } else if constexpr (K == ElementKind::kCast) {
    if (p.int_out) {
      out_i[e] = p.int_a ? static_cast<const int32_t*>(a)[e] : element::f32_to_s32(a_f[e]);
    } else {
      out_f[e] = detail::finish(p, detail::load_float(a, p.int_a, e));
    }
  } else if constexpr (K == ElementKind::kReduce) {
    out_f[e] = detail::finish(p, detail::reduce_element(p, a_f, e));
  } else if constexpr (K == ElementKind::kReducePartial) {
    const int64_t outputs = p.count / p.blocks;
    static_cast<double*>(out)[e] = detail::reduce_block(p, a_f, e % outputs, e / outputs);
  } else if constexpr (K == ElementKind::kReduceCombine) {
    static_cast<double*>(out)[e] =
        detail::reduce_group(p, static_cast<const double*>(a), e % p.len, e / p.len);
  } else if constexpr (K == ElementKind::kReduceFinish) {
    out_f[e] = detail::finish(p, detail::reduce_finish(p, static_cast<const double*>(a), e));
  } else if constexpr (K == ElementKind::kArgMax) {
    out_i[e] = detail::argmax_element(p, a_f, e);
  } else if constexpr (K == ElementKind::kGather || K == ElementKind::kTranspose) {
    detail::copy_element(a, element::strided_offset(p.map_a, e), out, e, p.int_out);
  } else if constexpr (K == ElementKind::kScatter) {
    detail::copy_element(a, e, out, element::strided_offset(p.map_a, e), p.int_out);
  } else if constexpr (K == ElementKind::kExtractPatches) {
    out_f[e] = fits_32_bits(p) ? detail::patch_element(p.patches, a_f, static_cast<uint32_t>(e))
                               : detail::patch_element(p.patches, a_f, e);
  } else if constexpr (K == ElementKind::kPatchesToImage) {
    out_f[e] = detail::finish(
        p, fits_32_bits(p) ? detail::image_element(p.patches, a_f, static_cast<uint32_t>(e))
                           : detail::image_element(p.patches, a_f, e));
  } else if constexpr (K == ElementKind::kOneHot) {
    const int32_t label = static_cast<const int32_t*>(a)[e / p.inner];
    out_f[e] = label == e % p.inner ? 1.0f : 0.0f;  // out of range: all zeros, as TF
  } else if constexpr (K == ElementKind::kIndexGather) {
    const int64_t row = element::clamp_index(static_cast<const int32_t*>(b)[e / p.inner], p.len);
    out_f[e] = a_f[row * p.inner + e % p.inner];  // a copy: bf16 values stay bf16 values
  } else if constexpr (K == ElementKind::kIndexScatterAdd) {
    detail::scatter_add_column(p, a_f, static_cast<const int32_t*>(b), out_f, e);
  } else if constexpr (K == ElementKind::kRngUniform) {
    out_f[e] = element::counter_uniform(p.seed, p.step, static_cast<uint64_t>(e));
  } else if constexpr (K == ElementKind::kRoundBf16) {
    out_f[e] = element::round_to_bf16(a_f[e]);
  }
}

// Every kind but kTranspose, whose GPU kernel is its own (kernels.cu): X(kind) for each, how
// eval_element and the kernel launch pick the instantiation for a plan's kind.
#define TPUSIM_ELEMENT_KINDS(X)                                                         \
  X(kBinary)                                                                            \
  X(kUnary)                                                                             \
  X(kSelect)                                                                            \
  X(kCast)                                                                              \
  X(kReduce) X(kReducePartial) X(kReduceCombine) X(kReduceFinish) X(kArgMax) X(kGather) \
      X(kScatter) X(kExtractPatches) X(kPatchesToImage) X(kOneHot) X(kIndexGather)      \
          X(kIndexScatterAdd) X(kRngUniform) X(kRoundBf16)

// Computes element e of `p` from inputs a, b, c (as many as the kind reads) into `out`.
TPUSIM_HOST_DEVICE inline void eval_element(const ElementPlan& p, const void* a, const void* b,
                                            const void* c, void* out, int64_t e) {
#define TPUSIM_EVAL_KIND(K)                        \
  case ElementKind::K:                             \
    eval_kind<ElementKind::K>(p, a, b, c, out, e); \
    break;
  switch (p.kind) {
    TPUSIM_ELEMENT_KINDS(TPUSIM_EVAL_KIND)
    case ElementKind::kTranspose:
      eval_kind<ElementKind::kTranspose>(p, a, b, c, out, e);
      break;
  }
#undef TPUSIM_EVAL_KIND
}

}  // namespace tpusim::runtime::gpu
