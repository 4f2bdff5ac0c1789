#include "sim/numerics/bf16.h"

namespace tpusim::sim {

void round_to_bf16(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = round_to_bf16(in[i]);
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
    const float a = round_to_bf16(in[i]);
    const float rest = in[i] - a;
    const float b = round_to_bf16(rest);
    t0[i] = a;
    t1[i] = b;
    if (t2 != nullptr) t2[i] = round_to_bf16(rest - b);
  }
}

}  // namespace tpusim::sim
