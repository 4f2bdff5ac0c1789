#pragma once
// bfloat16: the top 16 bits of an IEEE f32. The MXU rounds its inputs to bf16 with round to
// nearest, ties to even; products of two bf16 values are exact in f32, so an f32 GEMM over
// bf16-valued inputs reproduces the MXU's products, and accumulation is in f32.

#include <cstdint>
#include <cstring>

#include "sim/numerics/host_device.h"

namespace tpusim::sim {

// The bits of an f32 and back (memcpy on the host, the intrinsics on a GPU).
TPUSIM_HOST_DEVICE inline uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

TPUSIM_HOST_DEVICE inline float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
#endif
}

// The f32 bits of `bits` rounded to bf16 (round to nearest, ties to even; low half zero). NaNs
// keep their sign and become quiet NaNs (a payload only in the low bits must not round to
// infinity). Written without branches so host loops vectorise.
TPUSIM_HOST_DEVICE inline uint32_t round_bits_to_bf16(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const uint32_t quiet_nan = (bits | 0x00400000u) & 0xffff0000u;
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return is_nan ? quiet_nan : rounded;
}

TPUSIM_HOST_DEVICE inline uint16_t f32_to_bf16_bits(float value) {
  return static_cast<uint16_t>(round_bits_to_bf16(float_bits(value)) >> 16);
}

TPUSIM_HOST_DEVICE inline float bf16_bits_to_f32(uint16_t bits) {
  return bits_float(static_cast<uint32_t>(bits) << 16);
}

// The f32 value nearest to `value` that bf16 can hold.
TPUSIM_HOST_DEVICE inline float round_to_bf16(float value) {
  return bits_float(round_bits_to_bf16(float_bits(value)));
}

// Writes `n` values rounded to bf16 (as f32) to `out`; `in` and `out` may be the same.
void round_to_bf16(const float* in, float* out, size_t n);

// Splits each value into `parts` bf16 terms whose sum approximates it (parts = 1, 2 or 3):
// term 0 = bf16(x), term 1 = bf16(x - term0), term 2 = bf16(x - term0 - term1). terms[i]
// points to n floats.
void split_bf16(const float* in, size_t n, int parts, float* const* terms);

}  // namespace tpusim::sim
