#pragma once
// Backing store of one simulated memory (a core's VMEM, a chip's HBM). The first functional use
// reserves the whole capacity as anonymous virtual memory that the kernel backs page by page as
// it is touched, so timing-only runs and huge HBMs whose programs use little of them (or use
// only a core's share far from address 0) cost no host memory. Where the reservation is refused
// (strict overcommit, an address-space limit such as `ulimit -v`) it falls back to windows:
// separate mappings, each covering a range of addresses that is touched (in 16 MiB steps), so a
// program costs the address space of what it uses, wherever in the memory that is. Bounds are
// the validator's job; Memory only checks capacity.

#include <cstdint>
#include <string>
#include <vector>

namespace tpusim::sim {

class Memory {
 public:
  Memory(std::string name, uint64_t capacity_bytes);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  const std::string& name() const { return name_; }
  uint64_t capacity() const { return capacity_; }
  // Bytes of host memory backing it now (resident pages of its mappings).
  uint64_t allocated() const;

  // A base pointer B such that B + a is byte a of the memory for every a in [begin, end) (zero
  // until written); valid until the next call that may remap (never once base_is_stable()).
  // `end` must not exceed the capacity. Throws std::runtime_error naming the memory when the
  // host cannot map the range.
  uint8_t* base_covering(uint64_t begin, uint64_t end);
  // Whether base_covering's pointer is fixed for the memory's life (the whole reservation was
  // made, by an earlier base_covering), so another thread may use it while this one goes on.
  bool base_is_stable() const { return mapped_ != nullptr; }
  // The whole reservation's base once it is made (base_is_stable()), else null.
  const uint8_t* stable_base() const { return mapped_; }
  // How many windows back it (0 while the whole reservation does or nothing was touched).
  size_t windows() const { return windows_.size(); }

  void write(uint64_t address, const void* data, uint64_t size);
  void read(uint64_t address, void* data, uint64_t size);

 private:
  // A mapping holding bytes [begin, end) of the memory.
  struct Window {
    uint64_t begin = 0, end = 0;
    uint8_t* data = nullptr;
  };
  uint8_t* window_covering(uint64_t begin, uint64_t end);

  std::string name_;
  uint64_t capacity_;
  uint8_t* mapped_ = nullptr;    // the whole reservation, once made
  bool fallback_ = false;        // the reservation was refused: windows instead
  std::vector<Window> windows_;  // disjoint, in address order
};

}  // namespace tpusim::sim
