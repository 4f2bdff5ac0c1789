#pragma once
// Cores by number, as a test writes them (cores({0, 1, 2})), and back (numbers).

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "sim/ids.h"

namespace tpusim::sim {

inline std::vector<CoreId> cores(std::initializer_list<uint32_t> numbers) {
  std::vector<CoreId> out;
  for (uint32_t n : numbers) out.push_back(CoreId{n});
  return out;
}

inline std::vector<uint32_t> numbers(const std::vector<CoreId>& cores) {
  std::vector<uint32_t> out;
  for (CoreId core : cores) out.push_back(index(core));
  return out;
}

}  // namespace tpusim::sim
