#include "sim/chip/host_infeed.h"

namespace tpusim::sim {

HostInfeed::HostInfeed(const sc_core::sc_module_name& name, const ClockDomain& clock,
                       std::vector<HostLink*> links, const CoreMap& map)
    : sc_module(name), clock_(clock), links_(std::move(links)), map_(map) {
  SC_THREAD(run);
}

uint64_t HostInfeed::now_cycle() const {
  return clock_.cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
}

void HostInfeed::queue(InfeedStep step) {
  steps_.push_back(std::move(step));
  queued_.notify(sc_core::SC_ZERO_TIME);
}

void HostInfeed::run() {
  for (;;) {
    while (steps_.empty()) wait(queued_);
    InfeedStep& step = steps_.front();
    // Asked only now: the host's answer may depend on when the previous step was taken.
    const uint64_t ready = step.feed ? step.feed->ready_cycle(step.index) : step.ready_cycle;
    const uint64_t target = clock_.time_of(Cycles(ready));
    const uint64_t now = sc_core::sc_time_stamp().value();
    if (target > now) wait(sc_core::sc_time(static_cast<double>(target - now), sc_core::SC_PS));
    const uint64_t taken = now_cycle();
    if (step.feed) step.feed->taken(step.index, taken);
    outstanding_ = step.entries.size();
    for (auto& [core, entry] : step.entries) {
      HostLink& link = *links_[index(map_.chip_of(core))];
      link.send(map_.core_on_chip(core), std::move(entry), taken, [this] {
        if (--outstanding_ == 0) delivered_.notify();
      });
    }
    steps_.pop_front();
    while (outstanding_ > 0) wait(delivered_);
  }
}

}  // namespace tpusim::sim
