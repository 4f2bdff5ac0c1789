#include "sim/chip/core.h"

#include "common/strings.h"

namespace tpusim::sim {

Core::Core(const sc_core::sc_module_name& name, const CoreOptions& o, StatGroup& stats)
    : sc_module(name),
      stats_(stats.child(basename(), str_cat("TensorCore ", o.core_on_chip, " of chip ", o.chip))),
      vmem_(str_cat(basename(), ".vmem"), o.settings.slice->chip.core.vmem_bytes),
      vmem_ports_(static_cast<double>(o.settings.slice->chip.core.vmem_ports) *
                  o.settings.slice->chip.core.vmem_port_bytes_per_cycle),
      infeed_(o.settings.slice->chip.infeed_queue_depth),
      outfeed_(o.settings.slice->chip.outfeed_queue_depth),
      sync_(std::make_unique<SyncState>("sync", *o.settings.clock)),
      ctx_(CoreWiring{o.core, o.chip, o.core_on_chip, *o.settings.slice, *o.settings.clock,
                      o.settings.sink, vmem_, vmem_ports_, *o.settings.numerics, *o.hbm,
                      *o.hbm_timing, *sync_, infeed_, outfeed_, *o.outfeed_pushed, o.settings.fail},
           o.settings.timing_only) {
  const ModelSettings& settings = o.settings;
  const config::CoreSpec& spec = settings.slice->chip.core;

  CoreUnits wiring;
  for (uint32_t e = 0; e < spec.dma_engines; ++e) {
    units_.push_back(std::make_unique<DmaEngine>(str_cat("dma", e).c_str(), ctx_, stats_));
    wiring.dma.push_back(units_.back().get());
  }
  for (uint32_t m = 0; m < spec.mxu_count; ++m) {
    auto mxu = std::make_unique<MxuUnit>(
        str_cat("mxu", m).c_str(), ctx_, stats_,
        make_mxu_policy(settings.mxu_policy, spec.mxu_rows, spec.mxu_cols));
    mxus_.push_back(mxu.get());
    wiring.mxu.push_back(mxu.get());
    units_.push_back(std::move(mxu));
  }
  units_.push_back(std::make_unique<VectorUnit>("vpu", ctx_, stats_));
  wiring.vector = units_.back().get();
  auto infeed = std::make_unique<InfeedUnit>("infeed", ctx_, stats_);
  infeed_unit_ = infeed.get();
  wiring.infeed = infeed.get();
  units_.push_back(std::move(infeed));
  auto outfeed = std::make_unique<OutfeedUnit>("outfeed", ctx_, stats_);
  outfeed_unit_ = outfeed.get();
  wiring.outfeed = outfeed.get();
  units_.push_back(std::move(outfeed));
  units_.push_back(std::make_unique<CollectiveUnit>("ici", ctx_, stats_, *settings.collectives));
  wiring.collective = units_.back().get();
  sequencer_ = std::make_unique<Sequencer>("sequencer", ctx_, std::move(wiring), stats_);

  StatGroup& vmem_stats = stats_.child("vmem", "vector memory and its ports");
  vmem_stats.add("bytes_moved", "bytes", "bytes through the VMEM ports (all units)",
                 [this] { return vmem_ports_.bytes_served(); });
  vmem_stats.add("port_busy_cycles", "cycles", "cycles the VMEM ports were moving data",
                 [this] { return vmem_ports_.busy_cycles(); });
  vmem_stats.add("high_water_bytes", "bytes", "highest VMEM byte any instruction touched, plus one",
                 [this] { return static_cast<double>(ctx_.vmem_high_water()); });
  vmem_stats.add("allocated_bytes", "bytes", "host memory backing this VMEM (functional runs)",
                 [this] { return static_cast<double>(vmem_.allocated()); });
  vmem_stats.on_reset([this] {
    vmem_ports_.reset_stats();
    ctx_.reset_vmem_high_water();
  });
  StatGroup& feeds = stats_.child("feeds", "infeed and outfeed queues");
  feeds.add("infeed_high_water", "entries", "most entries the infeed queue held",
            [this] { return static_cast<double>(infeed_.high_water); });
  feeds.add("outfeed_high_water", "entries", "most entries the outfeed queue held",
            [this] { return static_cast<double>(outfeed_.high_water); });
  feeds.on_reset([this] {
    infeed_.high_water = infeed_.entries.size();
    outfeed_.high_water = outfeed_.entries.size();
  });
}

void Core::set_mxu_policy(const std::string& name) {
  const config::CoreSpec& spec = ctx_.slice().chip.core;
  for (MxuUnit* m : mxus_) m->set_policy(make_mxu_policy(name, spec.mxu_rows, spec.mxu_cols));
}

std::vector<std::string> Core::blocked() const {
  std::vector<std::string> out;
  if (std::string s = sequencer_->blocked_on(); !s.empty()) out.push_back(s);
  for (const auto& u : units_) {
    if (std::string s = u->blocked_on(); !s.empty()) out.push_back(s);
  }
  return out;
}

}  // namespace tpusim::sim
