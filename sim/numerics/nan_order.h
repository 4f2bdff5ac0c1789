#pragma once
// Max, min, ReLU and argmax as XLA computes them, NaN included, so that a run that diverges reads
// NaN on every backend (docs/numerics.md, "NaN"):
// - max and min are NaN when either operand is NaN (XLA's Max and Min propagate NaN:
//   jax.numpy.maximum(nan, 1.0) and maximum(1.0, nan) are both nan under XLA), otherwise the larger
//   (smaller) one, the first on a tie (so -0 and +0 keep their order);
// - ReLU is max(x, 0): NaN stays NaN;
// - a reduction's max is NaN when any term is;
// - argmax is the first NaN's index, or the first maximum's: XLA's argmax reducer orders NaN
//   above every number and breaks ties by the lower index (its comparator is
//   `x > y || x != x`, then the index on equality).
// Finite operands give exactly what `a < b ? b : a` gave: no finite figure moves.

#include <cstdint>

#include "sim/numerics/host_device.h"

namespace tpusim::sim {

template <typename T>
TPUSIM_HOST_DEVICE inline T nan_max(T a, T b) {
  return (a < b || b != b) ? b : a;
}

template <typename T>
TPUSIM_HOST_DEVICE inline T nan_min(T a, T b) {
  return (b < a || b != b) ? b : a;
}

TPUSIM_HOST_DEVICE inline float nan_relu(float v) { return (v > 0 || v != v) ? v : 0.0f; }

// The index in [0, len) of the first NaN among `len` values `stride` apart from `first`, or of
// the first maximum when none is NaN.
TPUSIM_HOST_DEVICE inline int64_t nan_argmax(const float* first, int64_t len, int64_t stride) {
  int64_t best = 0;
  float best_v = first[0];
  if (best_v != best_v) return 0;
  for (int64_t k = 1; k < len; ++k) {
    const float v = first[k * stride];
    if (v != v) return k;
    if (v > best_v) {
      best_v = v;
      best = k;
    }
  }
  return best;
}

// Eigen functors over whole tiles (binaryExpr, unaryExpr, redux).
struct NanMaxOp {
  float operator()(float a, float b) const { return nan_max(a, b); }
};
struct NanMinOp {
  float operator()(float a, float b) const { return nan_min(a, b); }
};
struct NanReluOp {
  float operator()(float v) const { return nan_relu(v); }
};

}  // namespace tpusim::sim
