#include "sim/memory/memory.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <sys/mman.h>
#include <unistd.h>

namespace tpusim::sim {

namespace {

constexpr uint64_t kWindowStep = 16ull << 20;  // windows start and end on 16 MiB boundaries

uint8_t* map_anonymous(uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(p);
}

uint64_t resident_bytes(const uint8_t* data, uint64_t bytes) {
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  if (mincore(const_cast<uint8_t*>(data), bytes, resident.data()) != 0) return 0;
  uint64_t pages = 0;
  for (unsigned char r : resident) pages += r & 1u;
  return pages * page;
}

}  // namespace

Memory::Memory(std::string name, uint64_t capacity_bytes)
    : name_(std::move(name)), capacity_(capacity_bytes) {}

Memory::~Memory() {
  if (mapped_ != nullptr) munmap(mapped_, capacity_);
  for (const Window& w : windows_) munmap(w.data, w.end - w.begin);
}

uint64_t Memory::allocated() const {
  if (mapped_ != nullptr) return resident_bytes(mapped_, capacity_);
  uint64_t bytes = 0;
  for (const Window& w : windows_) bytes += resident_bytes(w.data, w.end - w.begin);
  return bytes;
}

uint8_t* Memory::base_covering(uint64_t begin, uint64_t end) {
  if (end > capacity_ || begin > end) {
    // The validator rejects programs that reach past a memory; reaching here is a tpusim bug.
    throw std::out_of_range(name_ + ": access to bytes [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") beyond its capacity of " +
                            std::to_string(capacity_));
  }
  if (mapped_ != nullptr) return mapped_;
  if (!fallback_ && capacity_ > 0) {
    mapped_ = map_anonymous(capacity_);
    if (mapped_ != nullptr) return mapped_;
    fallback_ = true;
  }
  return window_covering(begin, end);
}

// The window holding [begin, end), made when none does: the range widened to the window steps
// and to every window it overlaps or touches, those windows' pages moved in. The
// returned base is the window's data less its first address: B + a is byte a inside it.
uint8_t* Memory::window_covering(uint64_t begin, uint64_t end) {
  for (const Window& w : windows_) {
    if (w.begin <= begin && end <= w.end) return w.data - w.begin;
  }
  uint64_t lo = begin / kWindowStep * kWindowStep;
  uint64_t hi =
      std::min(capacity_, (std::max(end, begin + 1) + kWindowStep - 1) / kWindowStep * kWindowStep);
  std::vector<Window> kept, merged;
  for (const Window& w : windows_) {
    if (w.end < lo || w.begin > hi) {
      kept.push_back(w);
    } else {
      merged.push_back(w);
      lo = std::min(lo, w.begin);
      hi = std::max(hi, w.end);
    }
  }
  Window made{lo, hi, map_anonymous(hi - lo)};
  if (made.data == nullptr) {
    throw std::runtime_error(name_ + ": the host cannot map " + std::to_string(hi - lo) +
                             " bytes for simulated bytes [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + ") (an address-space limit such as ulimit -v?)");
  }
  for (const Window& w : merged) {
    // Moves the pages (untouched ones stay unbacked) into place; copies where the kernel will not.
    uint8_t* into = made.data + (w.begin - lo);
    const uint64_t bytes = w.end - w.begin;
    if (mremap(w.data, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, into) == MAP_FAILED) {
      std::memcpy(into, w.data, bytes);
      munmap(w.data, bytes);
    }
  }
  kept.push_back(made);
  std::sort(kept.begin(), kept.end(),
            [](const Window& a, const Window& b) { return a.begin < b.begin; });
  windows_ = std::move(kept);
  return made.data - lo;
}

void Memory::write(uint64_t address, const void* data, uint64_t size) {
  std::memcpy(base_covering(address, address + size) + address, data, size);
}

void Memory::read(uint64_t address, void* data, uint64_t size) {
  std::memcpy(data, base_covering(address, address + size) + address, size);
}

}  // namespace tpusim::sim
