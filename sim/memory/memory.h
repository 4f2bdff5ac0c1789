#pragma once
// Backing store of one simulated memory (a core's VMEM, a chip's HBM). Allocated on first
// functional use and grown to the highest byte touched, so timing-only runs and huge HBMs
// whose programs use little of them cost no host memory. Bounds are the validator's job;
// Memory only checks capacity.

#include <cstdint>
#include <string>
#include <vector>

namespace tpusim::sim {

class Memory {
 public:
  Memory(std::string name, uint64_t capacity_bytes);

  const std::string& name() const { return name_; }
  uint64_t capacity() const { return capacity_; }
  // Bytes of host memory backing it now.
  uint64_t allocated() const { return bytes_.size(); }

  // A pointer to byte 0, valid until the next call that may grow the store; every byte below
  // `end` exists (zero until written). `end` must not exceed the capacity.
  uint8_t* base_covering(uint64_t end);

  void write(uint64_t address, const void* data, uint64_t size);
  void read(uint64_t address, void* data, uint64_t size);

 private:
  std::string name_;
  uint64_t capacity_;
  std::vector<uint8_t> bytes_;
};

}  // namespace tpusim::sim
