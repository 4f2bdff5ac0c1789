#include "sim/memory/memory.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <sys/mman.h>
#include <unistd.h>

namespace tpusim::sim {

namespace {
constexpr uint64_t kGrowthStep = 16ull << 20;  // fallback: grow in 16 MiB steps
}

Memory::Memory(std::string name, uint64_t capacity_bytes)
    : name_(std::move(name)), capacity_(capacity_bytes) {}

Memory::~Memory() {
  if (mapped_ != nullptr) munmap(mapped_, capacity_);
}

uint64_t Memory::allocated() const {
  if (mapped_ == nullptr) return bytes_.size();
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((capacity_ + page - 1) / page);
  if (mincore(mapped_, capacity_, resident.data()) != 0) return 0;
  uint64_t pages = 0;
  for (unsigned char r : resident) pages += r & 1u;
  return pages * page;
}

uint8_t* Memory::base_covering(uint64_t end) {
  if (end > capacity_) {
    // The validator rejects programs that reach past a memory; reaching here is a tpusim bug.
    throw std::out_of_range(name_ + ": access up to byte " + std::to_string(end) +
                            " beyond its capacity of " + std::to_string(capacity_));
  }
  if (mapped_ != nullptr) return mapped_;
  if (!fallback_ && capacity_ > 0) {
    void* p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      madvise(p, capacity_, MADV_HUGEPAGE);
      mapped_ = static_cast<uint8_t*>(p);
      return mapped_;
    }
    fallback_ = true;
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
