#pragma once
// f32 -> s32 as XLA (and so a TPU) converts: truncate toward zero, saturate values outside the
// s32 range, NaN to 0. A plain static_cast is undefined for those values and differs in practice
// (x86 gives INT32_MIN for all of them, CUDA saturates), so the simulator, the cpu backend and
// the gpu backend all convert through this one definition. jax 0.10 gives the same results;
// tf.cast on a CPU gives x86's INT32_MIN.

#include <cstdint>

#include "sim/numerics/host_device.h"

namespace tpusim::sim {

TPUSIM_HOST_DEVICE inline int32_t f32_to_s32(float v) {
  if (v != v) return 0;                       // NaN
  if (v >= 2147483648.0f) return INT32_MAX;   // 2^31 and above, +inf
  if (v <= -2147483648.0f) return INT32_MIN;  // -2^31 (exact) and below, -inf
  return static_cast<int32_t>(v);             // in range: truncates toward zero
}

}  // namespace tpusim::sim
