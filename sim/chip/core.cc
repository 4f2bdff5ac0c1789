#include "sim/chip/core.h"

#include "common/strings.h"
#include "sim/core_map.h"
#include "traces/analysis_events.h"

namespace tpusim::sim {

namespace {

// What every unit of the core shares.
CoreWiring shared_wiring(const CoreOptions& o, SyncState& sync) {
  const CoreMap map(*o.settings.slice);
  return CoreWiring{o.core,
                    map.chip_of(o.core),
                    map.core_on_chip(o.core),
                    *o.settings.clock,
                    o.settings.sink,
                    sync,
                    o.settings.slice->chip.core.unit_queue_depth,
                    o.settings.fail};
}

std::string describe(const CoreOptions& o) {
  const CoreMap map(*o.settings.slice);
  return str_cat("TensorCore ", map.core_on_chip(o.core), " of chip ", index(map.chip_of(o.core)));
}

}  // namespace

Core::Core(const sc_core::sc_module_name& name, const CoreOptions& o, StatGroup& stats)
    : sc_module(name),
      stats_(stats.child(basename(), describe(o))),
      spec_(o.settings.slice->chip.core),
      vmem_(str_cat(basename(), ".vmem"), spec_.vmem_bytes,
            static_cast<double>(spec_.vmem_ports) * spec_.vmem_port_bytes_per_cycle),
      infeed_(o.settings.slice->chip.infeed_queue_depth),
      outfeed_(o.settings.slice->chip.outfeed_queue_depth),
      sync_(std::make_unique<SyncState>("sync", *o.settings.clock)),
      hbm_(*o.hbm, *o.hbm_timing),
      outfeed_pushed_(*o.outfeed_pushed),
      numerics_(*o.settings.numerics, o.core, vmem_.memory(), *o.hbm),
      ctx_(shared_wiring(o, *sync_), o.settings.timing_only) {
  declare_tracks();
  build_units(o.settings);
  add_stats();
}

void Core::declare_tracks() {
  traces::Sink* sink = ctx_.sink();
  if (sink == nullptr) return;
  const int chip = static_cast<int>(index(ctx_.chip()));
  const int core = static_cast<int>(ctx_.core_on_chip());
  auto counter = [&](const char* track, const char* unit) {
    return sink->declare_track({traces::TrackInfo::Kind::kCounter, chip, core, track, unit});
  };
  infeed_.observe(sink, counter("infeed_queue_depth", "entries"));
  hbm_.set_bandwidth_track(RateCounter(sink, counter("hbm_bandwidth", "bytes/s")));
  ctx_.set_busy_track(
      BusyTrack(sink, sink->declare_track({traces::TrackInfo::Kind::kUnit, chip, core,
                                           std::string(traces::kBusyTrack), ""})));
}

uint64_t Core::thread_processes(const config::CoreSpec& spec) {
  constexpr uint64_t kFixedUnits = 4;  // vector, infeed, outfeed, ICI
  constexpr uint64_t kSequencer = 1;
  return uint64_t{spec.dma_engines} + spec.mxu_count + kFixedUnits + kSequencer;
}

void Core::build_units(const ModelSettings& settings) {
  CoreUnits wiring;
  for (uint32_t e = 0; e < spec_.dma_engines; ++e) {
    units_.push_back(std::make_unique<DmaEngine>(str_cat("dma", e).c_str(), ctx_, stats_,
                                                 DmaWiring{vmem_, hbm_, numerics_}));
    wiring.dma.push_back(units_.back().get());
  }
  for (uint32_t m = 0; m < spec_.mxu_count; ++m) {
    auto mxu = std::make_unique<MxuUnit>(
        str_cat("mxu", m).c_str(), ctx_, stats_, MxuWiring{vmem_, numerics_},
        make_mxu_policy(settings.mxu_policy, spec_.mxu_rows, spec_.mxu_cols));
    mxus_.push_back(mxu.get());
    wiring.mxu.push_back(mxu.get());
    units_.push_back(std::move(mxu));
  }
  units_.push_back(
      std::make_unique<VectorUnit>("vpu", ctx_, stats_, VectorWiring{spec_, vmem_, numerics_}));
  wiring.vector = units_.back().get();
  auto infeed =
      std::make_unique<InfeedUnit>("infeed", ctx_, stats_, InfeedWiring{infeed_, vmem_, numerics_});
  infeed_unit_ = infeed.get();
  wiring.infeed = infeed.get();
  units_.push_back(std::move(infeed));
  auto outfeed = std::make_unique<OutfeedUnit>(
      "outfeed", ctx_, stats_, OutfeedWiring{outfeed_, outfeed_pushed_, vmem_, numerics_});
  outfeed_unit_ = outfeed.get();
  wiring.outfeed = outfeed.get();
  units_.push_back(std::move(outfeed));
  units_.push_back(std::make_unique<CollectiveUnit>("ici", ctx_, stats_, *settings.collectives));
  wiring.collective = units_.back().get();
  sequencer_ = std::make_unique<Sequencer>("sequencer", ctx_, std::move(wiring), stats_);
}

void Core::add_stats() {
  StatGroup& vmem_stats = stats_.child("vmem", "vector memory and its ports");
  vmem_stats.add("bytes_moved", "bytes", "bytes through the VMEM ports (all units)",
                 [this] { return vmem_.ports().bytes_served(); });
  vmem_stats.add("port_busy_cycles", "cycles", "cycles the VMEM ports were moving data",
                 [this] { return vmem_.ports().busy_cycles(); });
  vmem_stats.add("high_water_bytes", "bytes", "highest VMEM byte any instruction touched, plus one",
                 [this] { return static_cast<double>(vmem_.high_water()); });
  vmem_stats.add("allocated_bytes", "bytes", "host memory backing this VMEM (functional runs)",
                 [this] { return static_cast<double>(vmem_.memory().allocated()); });
  vmem_stats.on_reset([this] {
    vmem_.ports().reset_stats();
    vmem_.reset_high_water();
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

void Core::begin_run(CoreRunSetup setup) {
  ctx_.begin_run(setup.shadow, std::move(setup.origins));
  hbm_.set_mirrors(std::move(setup.hbm_mirrors));
}

void Core::abandon_run() {
  sequencer_->abandon_run();
  for (auto& unit : units_) unit->abandon_run();
  sync_->abandon_run();
  infeed_.clear();
  outfeed_.clear();
  vmem_.abandon_run();
  hbm_.set_mirrors({});
}

void Core::set_mxu_policy(MxuPolicy policy) {
  for (MxuUnit* m : mxus_) m->set_policy(make_mxu_policy(policy, spec_.mxu_rows, spec_.mxu_cols));
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
