#include "sim/numerics/bf16.h"

namespace tpusim::sim {

void round_to_bf16(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = round_to_bf16(in[i]);
}

void split_bf16(const float* in, size_t n, int parts, float* const* terms) {
  for (size_t i = 0; i < n; ++i) {
    float rest = in[i];
    for (int p = 0; p < parts; ++p) {
      const float term = round_to_bf16(rest);
      terms[p][i] = term;
      rest -= term;  // exact: the difference of x and its bf16 rounding fits in f32
    }
  }
}

}  // namespace tpusim::sim
