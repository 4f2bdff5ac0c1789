#pragma once
// Backing store of one simulated memory (a core's VMEM, a chip's HBM). The first functional use
// reserves the whole capacity as anonymous virtual memory that the kernel backs page by page as
// it is touched, so timing-only runs and huge HBMs whose programs use little of them (or use
// only a core's share far from address 0) cost no host memory. Where the reservation is refused
// (strict overcommit, an address-space limit) it falls back to a buffer grown to the highest
// byte touched. Bounds are the validator's job; Memory only checks capacity.

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
  // Bytes of host memory backing it now (resident pages of the reservation).
  uint64_t allocated() const;

  // A pointer to byte 0, valid until the next call that may grow the store; every byte below
  // `end` exists (zero until written). `end` must not exceed the capacity.
  uint8_t* base_covering(uint64_t end);
  // Whether base_covering's pointer is fixed for the memory's life (the reservation was made,
  // by an earlier base_covering), so another thread may use it while this one goes on.
  bool base_is_stable() const { return mapped_ != nullptr; }

  void write(uint64_t address, const void* data, uint64_t size);
  void read(uint64_t address, void* data, uint64_t size);

 private:
  std::string name_;
  uint64_t capacity_;
  uint8_t* mapped_ = nullptr;  // the reservation, once made
  bool fallback_ = false;      // the reservation was refused: `bytes_` grows instead
  std::vector<uint8_t> bytes_;
};

}  // namespace tpusim::sim
