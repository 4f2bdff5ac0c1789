#pragma once
// Rounding sizes and addresses up to an alignment (the compiler keeps every HBM buffer and every
// staged VMEM block on a 4 KiB page), counting the pieces that cover an extent, and signed
// division rounded down or up.

#include <cstdint>

namespace tpusim {

inline constexpr uint64_t kPageBytes = 4096;

// How many pieces of `piece` (> 0) cover `extent`: extent / piece rounded up.
constexpr uint64_t pieces_covering(uint64_t extent, uint64_t piece) {
  return (extent + piece - 1) / piece;
}

// a / b rounded towards minus infinity, and towards plus infinity (b != 0; either may be
// negative): a window offset before an image's first pixel divided by the stride.
constexpr int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}
constexpr int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The least multiple of `alignment` (> 0) at or above `bytes`.
constexpr uint64_t align_up(uint64_t bytes, uint64_t alignment = kPageBytes) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace tpusim
