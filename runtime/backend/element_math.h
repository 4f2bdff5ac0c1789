#pragma once
// Per-element arithmetic that the cpu and gpu backends must compute bit for bit the same way:
// the counter-based RNG, bf16 rounding of one float, the binary and unary elementwise ops, the
// ring order of cross_replica_sum and the strided index maps of the layout ops. g++ compiles it
// for the cpu kernels, nvcc for the gpu kernels (TPUSIM_HOST_DEVICE is __host__ __device__
// there), so each formula has one definition.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/graph/graph.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/convert.h"
#include "sim/numerics/host_device.h"
#include "sim/numerics/nan_order.h"
#include "sim/numerics/random.h"

namespace tpusim::runtime::element {

// The RNG, bf16 rounding and the f32 -> s32 conversion are the simulator's own (its vector unit
// and MXU compute with them), host/device functions in sim/numerics.
using sim::bits_float;
using sim::counter_uniform;
using sim::f32_to_bf16_bits;
using sim::f32_to_s32;
using sim::float_bits;
using sim::mix64;
using sim::round_bits_to_bf16;
using sim::round_to_bf16;

// The binary elementwise ops (is_binary_elementwise). Max and min are XLA's: NaN when either
// operand is (sim/numerics/nan_order.h).
TPUSIM_HOST_DEVICE inline float apply_binary(Op op, float a, float b) {
  switch (op) {
    case Op::kAdd:
      return a + b;
    case Op::kSub:
      return a - b;
    case Op::kMul:
      return a * b;
    case Op::kDiv:
      return a / b;
    case Op::kMax:
      return sim::nan_max(a, b);
    case Op::kMin:
      return sim::nan_min(a, b);
    case Op::kEqual:
      return a == b ? 1.0f : 0.0f;
    case Op::kGreater:
      return a > b ? 1.0f : 0.0f;
    default:
      return 0;
  }
}

// The unary elementwise ops (is_unary_elementwise). Exact ops (neg, relu, rsqrt, square) agree
// bit for bit between host and device; tanh, sigmoid, exp, log and erf use each side's libm,
// which differ by a few units in the last place. The host's erf is erff, as the tpusim vector
// unit's ERF computes it: cpu and tpusim agree bit for bit.
TPUSIM_HOST_DEVICE inline float apply_unary(Op op, float v) {
  switch (op) {
    case Op::kNeg:
      return -v;
    case Op::kRelu:
      return sim::nan_relu(v);  // NaN stays NaN, as XLA's max(x, 0)
#if defined(__CUDA_ARCH__)
    case Op::kTanh:
      return tanhf(v);
    case Op::kSigmoid:
      return 1.0f / (1.0f + expf(-v));
    case Op::kExp:
      return expf(v);
    case Op::kLog:
      return logf(v);
    case Op::kRsqrt:
      return 1.0f / sqrtf(v);  // IEEE sqrt and division (nvcc's defaults), not rsqrtf
    case Op::kErf:
      return erff(v);  // CUDA: within 2 ulp
#else
    case Op::kTanh:
      return std::tanh(v);
    case Op::kSigmoid:
      return 1.0f / (1.0f + std::exp(-v));
    case Op::kExp:
      return std::exp(v);
    case Op::kLog:
      return std::log(v);
    case Op::kRsqrt:
      return 1.0f / std::sqrt(v);
    case Op::kErf:
      return std::erf(v);  // erff (glibc: within 1 ulp)
#endif
    case Op::kSquare:
      return v * v;
    default:
      return v;
  }
}

// The table row an index names in gather and scatter_add: clamped into [0, rows - 1], as XLA's
// gather clamps its start indices on TPU (graph.h, kGather).
TPUSIM_HOST_DEVICE inline int64_t clamp_index(int32_t index, int64_t rows) {
  return index < 0 ? 0 : (index >= rows ? rows - 1 : static_cast<int64_t>(index));
}

// One term of reduce_max (std::max spelled out) or reduce_sum, accumulated in double.
TPUSIM_HOST_DEVICE inline double reduce_step(bool is_max, double acc, double v) {
  return is_max ? sim::nan_max(acc, v) : acc + v;
}

// The one order every backend but tpusim sums a reduction in (issue 36: a fixed, parallel
// order, the same blocking on cpu and gpu): a tree of fan-out kReduceBlock. An output's terms, in
// row-major order of the reduced coordinates, are cut into groups of kReduceBlock, and each
// group is summed in double from zero, entry after entry; the groups' sums, in group order, are
// the next level's entries, cut and summed the same way, until one group is left, whose sum is
// the result. The groups of a level are independent, so a GPU sums them on separate threads and
// a cpu on separate cores; a reduction of at most kReduceBlock terms is the plain serial sum, one
// of at most kReduceBlock^2 the serial sum of its blocks' sums. reduce_max has no order to keep
// (max is exact) and takes the same tree.
constexpr int64_t kReduceBlock = 256;

// The groups a level of `entries` entries is cut into (1 when it is the last level).
TPUSIM_HOST_DEVICE inline int64_t reduce_blocks(int64_t terms) {
  return terms <= kReduceBlock ? 1 : (terms + kReduceBlock - 1) / kReduceBlock;
}

TPUSIM_HOST_DEVICE inline double reduce_start(bool is_max) {
  return is_max ? -static_cast<double>(INFINITY) : 0.0;
}

// A strided walk of a row-major index space: element `linear` of `dims` sits at
// base + sum(coordinate[d] * strides[d]) in another tensor. Every layout op is one (transpose,
// broadcast and slice read through it; concat and pad write through it), and so are the
// operands of a broadcasting binary op and the two halves of a reduction.
constexpr int kMaxRank = 8;

struct StridedMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t base = 0;
};

// Indices below 2^32 divide in 32 bits: a GPU has no 64-bit divider, and a 64-bit division
// there is a long software routine. Both paths give the same offset.
TPUSIM_HOST_DEVICE inline int64_t strided_offset(const StridedMap& m, int64_t linear) {
  int64_t offset = m.base;
  if (linear >= 0 && linear <= 0xffffffffLL) {
    auto rest = static_cast<uint32_t>(linear);
    for (int d = m.rank - 1; d >= 0 && rest != 0; --d) {
      if (m.dims[d] > rest) return offset + static_cast<int64_t>(rest) * m.strides[d];
      const auto extent = static_cast<uint32_t>(m.dims[d]);  // at most rest: below 2^32
      offset += static_cast<int64_t>(rest % extent) * m.strides[d];
      rest /= extent;
    }
    return offset;
  }
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t extent = m.dims[d];
    offset += (linear % extent) * m.strides[d];
    linear /= extent;
  }
  return offset;
}

// The same walk with adjacent dimensions that step through memory as one merged (a row-major
// run), and dimensions of extent 1 dropped: every offset is unchanged, with fewer divisions. A
// contiguous map becomes one dimension of stride 1.
inline StridedMap merged_map(const StridedMap& m) {
  StridedMap out;
  out.base = m.base;
  for (int d = 0; d < m.rank; ++d) {
    if (m.dims[d] == 1) continue;
    if (out.rank > 0 && out.strides[out.rank - 1] == m.dims[d] * m.strides[d]) {
      out.dims[out.rank - 1] *= m.dims[d];
      out.strides[out.rank - 1] = m.strides[d];
      continue;
    }
    out.dims[out.rank] = m.dims[d];
    out.strides[out.rank] = m.strides[d];
    ++out.rank;
  }
  return out;
}

// cross_replica_sum's order (a ring all-reduce over replicas 0 .. k-1): the n elements are cut
// into k segments as evenly as possible (the first n % k one longer); segment s is summed from
// replica s+1 round to replica s. The segment of element i:
TPUSIM_HOST_DEVICE inline uint64_t ring_segment(uint64_t i, uint64_t n, uint64_t k) {
  const uint64_t small = n / k, long_segments = n % k;
  const uint64_t in_long = long_segments * (small + 1);
  return i < in_long ? i / (small + 1) : long_segments + (i - in_long) / small;
}

// Element i of the ring sum of `parts[0 .. k-1]` (each n elements), accumulated in T. Parts is
// anything that gives replica r's values as parts[r]: an array of pointers, or replicas that lie
// at a fixed stride in one buffer (the gpu backend's).
template <typename T, typename Parts>
TPUSIM_HOST_DEVICE inline T ring_sum_of(const Parts& parts, uint64_t k, uint64_t n, uint64_t i) {
  const uint64_t s = ring_segment(i, n, k);
  T acc = parts[(s + 1) % k][i];
  for (uint64_t r = 2; r <= k; ++r) acc += parts[(s + r) % k][i];
  return acc;
}

template <typename T>
TPUSIM_HOST_DEVICE inline T ring_sum_element(const T* const* parts, uint64_t k, uint64_t n,
                                             uint64_t i) {
  return ring_sum_of<T>(parts, k, n, i);
}

}  // namespace tpusim::runtime::element
