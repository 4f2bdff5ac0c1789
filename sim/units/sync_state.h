#pragma once
// A core's sync flags and its count of instructions in flight. Units complete instructions at
// cycles they compute ahead of time (an MXU's results are out R + C - 2 cycles after its last
// row entered, while the MXU already streams the next matmul); SyncState lands each
// completion's signals at its cycle with one timed notification, so no unit waits for its own
// completions and no process ticks.

#include <array>
#include <cstdint>
#include <queue>
#include <systemc>
#include <vector>

#include <google/protobuf/repeated_field.h>

#include "sim/clock.h"
#include "sim/isa/isa.pb.h"
#include "sim/isa/ops.h"

namespace tpusim::sim {

class SyncState : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(SyncState);
  SyncState(const sc_core::sc_module_name& name, const ClockDomain& clock);

  // Every wait of `instr` holds now.
  bool satisfied(const isa::Instruction& instr) const;
  uint64_t count(uint32_t flag) const { return counts_[flag]; }

  // An instruction was handed to a unit; it is outstanding until its completion lands.
  void issued() { ++outstanding_; }
  // The instruction completes at `cycle` (now or later): its signals land then.
  void complete_at(uint64_t cycle, const google::protobuf::RepeatedField<uint32_t>& signals);
  uint64_t outstanding() const { return outstanding_; }

  // Notified (one delta later) whenever a flag changes.
  const sc_core::sc_event& changed() const { return changed_; }
  // Notified (one delta later) whenever the last outstanding instruction completed.
  const sc_core::sc_event& drained() const { return drained_; }

  // Every flag back to 0 (a loop boundary); only when nothing is outstanding.
  void reset_flags();
  // After a failed run: every flag 0, nothing outstanding, no completion left to land.
  void abandon_run();
  // The first waits of `instr` not yet met, for deadlock messages: "flag 3 >= 2 (now 1)".
  std::string unmet(const isa::Instruction& instr) const;

 private:
  struct Pending {
    uint64_t cycle;
    uint64_t sequence;  // ties land in completion order: runs are reproducible
    std::vector<uint32_t> signals;
    bool operator>(const Pending& o) const {
      return cycle != o.cycle ? cycle > o.cycle : sequence > o.sequence;
    }
  };
  void land(const std::vector<uint32_t>& signals);
  void deliver();  // SC_METHOD: lands every completion due now, re-arms for the next
  uint64_t now_cycle() const;

  const ClockDomain& clock_;
  std::array<uint64_t, kNumFlags> counts_{};
  uint64_t outstanding_ = 0;
  uint64_t sequence_ = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
  sc_core::sc_event wake_;
  sc_core::sc_event changed_;
  sc_core::sc_event drained_;
};

}  // namespace tpusim::sim
