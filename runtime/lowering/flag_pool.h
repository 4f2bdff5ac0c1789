#pragma once
// Sync flags shared by the fragments of one program segment (a loop body or the whole stream).
// Flag counts only grow within a segment, so a fragment that reuses a flag must wait for counts
// above what earlier fragments signalled: FlagPool remembers every flag's count so far, and
// fragments name waits relative to it.

#include <array>
#include <cstdint>

#include "sim/isa/builder.h"
#include "sim/isa/ops.h"

namespace tpusim::runtime {

class FlagPool {
 public:
  // Flags are handed out once per program and reused by every fragment.
  uint32_t allocate() { return next_++; }
  uint64_t count(uint32_t flag) const { return counts_[flag]; }
  // Records that `ref` signals `flag` once more.
  void signal(sim::InstrRef& ref, uint32_t flag) {
    ref.signal(flag);
    ++counts_[flag];
  }
  uint32_t allocated() const { return next_; }

 private:
  uint32_t next_ = 0;
  std::array<uint64_t, sim::kNumFlags> counts_{};
};

}  // namespace tpusim::runtime
