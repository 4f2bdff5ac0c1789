#pragma once
// Rounding sizes and addresses up to an alignment (the compiler keeps every HBM buffer and every
// staged VMEM block on a 4 KiB page), and counting the pieces that cover an extent.

#include <cstdint>

namespace tpusim {

inline constexpr uint64_t kPageBytes = 4096;

// How many pieces of `piece` (> 0) cover `extent`: extent / piece rounded up.
constexpr uint64_t pieces_covering(uint64_t extent, uint64_t piece) {
  return (extent + piece - 1) / piece;
}

// The least multiple of `alignment` (> 0) at or above `bytes`.
constexpr uint64_t align_up(uint64_t bytes, uint64_t alignment = kPageBytes) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace tpusim
