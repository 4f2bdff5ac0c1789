#include "sim/numerics/bf16.h"

namespace tpusim::sim {

namespace {

// The scalar rounding of bf16.h written without branches, so the loops below vectorise: NaNs
// keep their sign and become quiet NaNs; everything else rounds to nearest even.
inline uint32_t round_bits(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const uint32_t quiet_nan = (bits | 0x00400000u) & 0xffff0000u;
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return is_nan ? quiet_nan : rounded;
}

inline float round_fast(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits = round_bits(bits);
  std::memcpy(&value, &bits, sizeof bits);
  return value;
}

}  // namespace

void round_to_bf16(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = round_fast(in[i]);
}

void split_bf16(const float* in, size_t n, int parts, float* const* terms) {
  if (parts == 1) {
    round_to_bf16(in, terms[0], n);
    return;
  }
  float* t0 = terms[0];
  float* t1 = terms[1];
  float* t2 = parts > 2 ? terms[2] : nullptr;
  for (size_t i = 0; i < n; ++i) {
    // Each difference is exact: x minus its bf16 rounding fits in f32.
    const float a = round_fast(in[i]);
    const float rest = in[i] - a;
    const float b = round_fast(rest);
    t0[i] = a;
    t1[i] = b;
    if (t2 != nullptr) t2[i] = round_fast(rest - b);
  }
}

}  // namespace tpusim::sim
