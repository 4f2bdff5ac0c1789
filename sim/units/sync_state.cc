#include "sim/units/sync_state.h"

#include "common/strings.h"

namespace tpusim::sim {

SyncState::SyncState(const sc_core::sc_module_name& name, const ClockDomain& clock)
    : sc_module(name), clock_(clock) {
  SC_METHOD(deliver);
  sensitive << wake_;
  dont_initialize();
}

uint64_t SyncState::now_cycle() const {
  return clock_.cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
}

bool SyncState::satisfied(const isa::Instruction& instr) const {
  for (const auto& w : instr.wait()) {
    if (counts_[w.flag()] < w.value()) return false;
  }
  return true;
}

std::string SyncState::unmet(const isa::Instruction& instr) const {
  std::string out;
  for (const auto& w : instr.wait()) {
    if (counts_[w.flag()] < w.value()) {
      out += str_cat(out.empty() ? "" : ", ", "flag ", w.flag(), " >= ", w.value(), " (now ",
                     counts_[w.flag()], ")");
    }
  }
  return out;
}

void SyncState::land(const std::vector<uint32_t>& signals) {
  for (uint32_t f : signals) ++counts_[f];
  if (!signals.empty()) changed_.notify(sc_core::SC_ZERO_TIME);
  if (--outstanding_ == 0) drained_.notify(sc_core::SC_ZERO_TIME);
}

void SyncState::complete_at(uint64_t cycle,
                            const google::protobuf::RepeatedField<uint32_t>& signals) {
  std::vector<uint32_t> flags(signals.begin(), signals.end());
  const uint64_t now = now_cycle();
  if (cycle <= now) {
    land(flags);
    return;
  }
  pending_.push(Pending{cycle, sequence_++, std::move(flags)});
  // An sc_event keeps only its earliest pending notification, which is what we want.
  wake_.notify(sc_core::sc_time(
      static_cast<double>(clock_.time_of(Cycles(cycle)) - sc_core::sc_time_stamp().value()),
      sc_core::SC_PS));
}

void SyncState::deliver() {
  const uint64_t now = now_cycle();
  while (!pending_.empty() && pending_.top().cycle <= now) {
    Pending p = pending_.top();
    pending_.pop();
    land(p.signals);
  }
  if (!pending_.empty()) {
    wake_.notify(sc_core::sc_time(static_cast<double>(clock_.time_of(Cycles(pending_.top().cycle)) -
                                                      sc_core::sc_time_stamp().value()),
                                  sc_core::SC_PS));
  }
}

void SyncState::reset_flags() { counts_.fill(0); }

void SyncState::abandon_run() {
  counts_.fill(0);
  outstanding_ = 0;
  pending_ = {};
}

}  // namespace tpusim::sim
