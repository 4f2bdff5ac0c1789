#include "sim/memory/memory.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tpusim::sim {

namespace {
constexpr uint64_t kGrowthStep = 16ull << 20;  // grow in 16 MiB steps to avoid many copies
}

Memory::Memory(std::string name, uint64_t capacity_bytes)
    : name_(std::move(name)), capacity_(capacity_bytes) {}

uint8_t* Memory::base_covering(uint64_t end) {
  if (end > capacity_) {
    // The validator rejects programs that reach past a memory; reaching here is a tpusim bug.
    throw std::out_of_range(name_ + ": access up to byte " + std::to_string(end) +
                            " beyond its capacity of " + std::to_string(capacity_));
  }
  if (end > bytes_.size()) {
    const uint64_t grown = std::min(capacity_, (end + kGrowthStep - 1) / kGrowthStep * kGrowthStep);
    bytes_.resize(grown, 0);
  }
  return bytes_.data();
}

void Memory::write(uint64_t address, const void* data, uint64_t size) {
  std::memcpy(base_covering(address + size) + address, data, size);
}

void Memory::read(uint64_t address, void* data, uint64_t size) {
  std::memcpy(data, base_covering(address + size) + address, size);
}

}  // namespace tpusim::sim
