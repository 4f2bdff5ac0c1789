#pragma once
// Rounding sizes and addresses up to an alignment: the compiler keeps every HBM buffer and every
// staged VMEM block on a 4 KiB page.

#include <cstdint>

namespace tpusim {

inline constexpr uint64_t kPageBytes = 4096;

// The least multiple of `alignment` (> 0) at or above `bytes`.
constexpr uint64_t align_up(uint64_t bytes, uint64_t alignment = kPageBytes) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace tpusim
