#include "sim/units/core_context.h"

#include "traces/analysis_events.h"

namespace tpusim::sim {

CoreContext::CoreContext(CoreWiring wiring, bool timing_only)
    : wiring_(std::move(wiring)), timing_only_(timing_only) {
  traces::Sink* sink = wiring_.sink;
  if (sink == nullptr) return;
  const int chip = static_cast<int>(wiring_.chip), core = static_cast<int>(wiring_.core_on_chip);
  auto counter = [&](const char* track, const char* unit) {
    return sink->declare_track({traces::TrackInfo::Kind::kCounter, chip, core, track, unit});
  };
  wiring_.infeed.observe(sink, counter("infeed_queue_depth", "entries"));
  hbm_bandwidth_ = RateCounter(sink, counter("hbm_bandwidth", "bytes/s"));
  busy_ = BusyTrack(sink, sink->declare_track({traces::TrackInfo::Kind::kUnit, chip, core,
                                               std::string(traces::kBusyTrack), ""}));
}

void CoreContext::begin_run(CoreRunSetup setup) {
  shadow_ = setup.shadow;
  hbm_mirrors_ = std::move(setup.hbm_mirrors);
  ops_.reset(std::move(setup.origins));
}

void CoreContext::post_numerics(bool shared, HostRange read, HostRange write,
                                std::function<void()> job) {
  if (vmem().base_is_stable() && (!shared || hbm().base_is_stable())) {
    wiring_.numerics.post(core(), shared, read, write, std::move(job));
  } else {
    wiring_.numerics.drain();
    job();
  }
}

void CoreContext::before_vmem_access(const isa::Block* read, const isa::Block* write) {
  NumericsWorker& numerics = wiring_.numerics;
  if (!numerics.may_be_busy()) return;
  const uint8_t* base = vmem().base_covering(0);
  const HostRange r = read != nullptr ? host_range(base, *read) : HostRange{};
  numerics.before_access(core(), &r, 1, write != nullptr ? host_range(base, *write) : HostRange{});
}

}  // namespace tpusim::sim
