#pragma once
// bfloat16: the top 16 bits of an IEEE f32. The MXU rounds its inputs to bf16 with round to
// nearest, ties to even; products of two bf16 values are exact in f32, so an f32 GEMM over
// bf16-valued inputs reproduces the MXU's products, and accumulation is in f32.

#include <cstdint>
#include <cstring>

namespace tpusim::sim {

inline uint16_t f32_to_bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // ties go to the even neighbour
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_bits_to_f32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// The f32 value nearest to `value` that bf16 can hold.
inline float round_to_bf16(float value) { return bf16_bits_to_f32(f32_to_bf16_bits(value)); }

// Writes `n` values rounded to bf16 (as f32) to `out`; `in` and `out` may be the same.
void round_to_bf16(const float* in, float* out, size_t n);

// Splits each value into `parts` bf16 terms whose sum approximates it (parts = 1, 2 or 3):
// term 0 = bf16(x), term 1 = bf16(x - term0), term 2 = bf16(x - term0 - term1). terms[i]
// points to n floats.
void split_bf16(const float* in, size_t n, int parts, float* const* terms);

}  // namespace tpusim::sim
