#include "sim/chip/chip.h"

#include "common/host_budget.h"
#include "common/strings.h"
#include "sim/core_map.h"

namespace tpusim::sim {

namespace {
double bytes_per_cycle(double bytes_per_s, const ClockDomain& clock) {
  return bytes_per_s / clock.frequency_hz();
}
}  // namespace

uint64_t Chip::thread_processes(const config::ChipSpec& spec) {
  constexpr uint64_t kHostLinkThreads = 2;  // host to device, device to host
  return saturating_sum(saturating_product(spec.tensor_cores, Core::thread_processes(spec.core)),
                        kHostLinkThreads);
}

Chip::Chip(const sc_core::sc_module_name& name, const ModelSettings& settings, ChipId chip,
           StatGroup& stats)
    : sc_module(name),
      stats_(stats.child(basename(),
                         str_cat("chip ", index(chip), " (", settings.slice->chip.name, ")"))),
      hbm_(str_cat(basename(), ".hbm"), hbm_address_space(*settings.slice)),
      hbm_timing_(settings.slice->chip.hbm.channels,
                  bytes_per_cycle(settings.slice->chip.hbm.bandwidth_bytes_per_s, *settings.clock),
                  settings.slice->chip.hbm.interleave_bytes,
                  settings.slice->chip.hbm.latency_s * settings.clock->frequency_hz()) {
  const config::SliceSpec& slice = *settings.slice;
  const CoreMap map(slice);
  std::vector<Core*> cores;
  for (uint32_t c = 0; c < slice.chip.tensor_cores; ++c) {
    CoreOptions co;
    co.settings = settings;
    co.core = map.core(chip, c);
    co.hbm = &hbm_;
    co.hbm_timing = &hbm_timing_;
    co.outfeed_pushed = &outfeed_pushed_;
    cores_.push_back(std::make_unique<Core>(str_cat("core", c).c_str(), co, stats_));
    cores.push_back(cores_.back().get());
  }
  host_link_ = std::make_unique<HostLink>("host_link", slice.chip, *settings.clock,
                                          std::move(cores), outfeed_pushed_, stats_, settings.sink,
                                          static_cast<int>(index(chip)));
  StatGroup& hbm = stats_.child("hbm", "high-bandwidth memory shared by the chip's cores");
  hbm.add("bytes", "bytes", "bytes moved by DMA to and from HBM",
          [this] { return hbm_timing_.bytes_served(); });
  hbm.add("busiest_channel_cycles", "cycles", "cycles the busiest HBM channel was transferring",
          [this] { return hbm_timing_.busiest_channel_cycles(); });
  hbm.add("allocated_bytes", "bytes", "host memory backing this HBM (functional runs)",
          [this] { return static_cast<double>(hbm_.allocated()); });
  hbm.on_reset([this] { hbm_timing_.reset_stats(); });
}

void Chip::abandon_run() {
  for (auto& core : cores_) core->abandon_run();
  hbm_timing_.forget_reservations();
  host_link_->abandon_run();
}

}  // namespace tpusim::sim
