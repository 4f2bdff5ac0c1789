#include "sim/net/collective_engine.h"

#include <algorithm>

#include "sim/net/collective_values.h"

namespace tpusim::sim {
namespace {

// How long from now until cycle `cycle` (rounded up to a whole cycle) begins.
sc_core::sc_time until(const ClockDomain& clock, double cycle) {
  const Picoseconds target = clock.time_of(Cycles(ceil_cycle(cycle)));
  const Picoseconds now = sc_core::sc_time_stamp().value();
  return sc_core::sc_time(static_cast<double>(target > now ? target - now : 0), sc_core::SC_PS);
}

// A vector unit's f32 additions per cycle: one per lane and sublane.
double vector_elements_per_cycle(const config::SliceSpec& slice) {
  return static_cast<double>(slice.chip.core.vector_lanes) * slice.chip.core.vector_sublanes;
}

}  // namespace

CollectiveEngine::CollectiveEngine(const sc_core::sc_module_name& name,
                                   const config::SliceSpec& slice, const ClockDomain& clock,
                                   StatGroup& stats, std::function<void(const std::string&)> fail)
    : sc_module(name),
      clock_(clock),
      fail_(std::move(fail)),
      topology_(slice),
      interconnect_(topology_, clock),
      rendezvous_(topology_, slice.cores),
      schedule_(topology_, slice.cores, vector_elements_per_cycle(slice), *this) {
  SC_THREAD(thread);
  for (uint32_t c = 0; c < slice.cores; ++c)
    done_events_.push_back(std::make_unique<sc_core::sc_event>());
  add_stats(stats);
}

void CollectiveEngine::add_stats(StatGroup& stats) {
  StatGroup& s = stats.child("interconnect", "ICI links between chips and links between cores");
  s.add("collectives", "collectives", "collectives run (each counted once, not per member)",
        [this] { return static_cast<double>(collectives_); });
  s.add("chunk_transfers", "transfers", "chunks moved from one member to another",
        [this] { return schedule_.chunk_transfers(); });
  s.add("bytes", "bytes", "bytes moved over all links (each hop counted)", [this] {
    double b = 0;
    for (uint32_t l = 0; l < topology_.link_count(); ++l) b += interconnect_.bytes_on(l);
    return b;
  });
  s.add("hbm_bytes", "bytes", "bytes the collectives read and wrote in HBM (every core)",
        [this] { return schedule_.hbm_bytes(); });
  s.add("busiest_link_busy_cycles", "cycles", "cycles the busiest link was transferring", [this] {
    double most = 0;
    for (uint32_t l = 0; l < topology_.link_count(); ++l)
      most = std::max(most, interconnect_.busy_cycles_on(l));
    return most;
  });
  s.on_reset([this] {
    collectives_ = 0;
    schedule_.reset_stats();
    interconnect_.reset_stats();
  });
}

void CollectiveEngine::begin_run() {
  schedule_.begin_run();
  rendezvous_.begin_run();
}

void CollectiveEngine::abandon_run() {
  begin_run();
  interconnect_.forget_reservations();
}

void CollectiveEngine::arrive(CoreId core, const isa::Collective& c, int index, uint64_t cycle,
                              bool functional) {
  std::string error;
  const CollectiveGroup* group = rendezvous_.arrive(core, c, index, functional, &error);
  if (!error.empty()) {
    fail_(error);
    return;
  }
  schedule_.issued(core, static_cast<double>(cycle));
  if (group != nullptr) start(*group, static_cast<double>(cycle));
}

void CollectiveEngine::start(const CollectiveGroup& group, double cycle) {
  ++collectives_;
  if (const std::string error = duplicate_peers(group); !error.empty()) {
    fail_(error);
    return;
  }
  const CollectivePlan& plan = schedule_.start(group, cycle);
  if (group.functional) {
    write_collective_results(
        group, plan, [this](CoreId core) -> Memory& { return hbm_[index(core)].hbm->memory(); },
        numerics_);
  }
  work_.notify(sc_core::SC_ZERO_TIME);
}

double CollectiveEngine::hbm_transfer(CoreId core, const MemberBuffer& buffer, uint64_t offset,
                                      double bytes, double cycle) {
  const MemberHbm& h = hbm_[index(core)];
  HbmTiming& timing = h.hbm->timing();
  double end = cycle;
  buffer.for_each(offset, static_cast<uint64_t>(bytes), [&](uint64_t address, uint64_t n) {
    end = std::max(end, timing.transfer(cycle, address, n));
  });
  if (h.shadow == nullptr || !*h.shadow)
    h.hbm->bandwidth().add_bytes(clock_.time_at(cycle), clock_.time_at(end), bytes);
  return end;
}

void CollectiveEngine::finished(CoreId core, double cycle) {
  done_events_[index(core)]->notify(until(clock_, cycle));
}

void CollectiveEngine::thread() {
  for (;;) {
    if (schedule_.idle()) {
      wait(work_);
      continue;
    }
    const uint64_t now = clock_.cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
    const double next = schedule_.next_time();
    if (next > static_cast<double>(now)) {
      wait(until(clock_, next), work_);
      continue;
    }
    schedule_.run_until(static_cast<double>(now));
  }
}

}  // namespace tpusim::sim
