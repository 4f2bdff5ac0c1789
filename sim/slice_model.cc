#include "sim/slice_model.h"

#include <algorithm>

#include "common/host_budget.h"
#include "common/strings.h"

namespace tpusim::sim {

uint64_t SliceModel::thread_processes(const config::SliceSpec& slice) {
  constexpr uint64_t kCollectiveEngine = 1;
  const uint64_t infeeds = std::max<uint32_t>(slice.hosts, 1);
  return saturating_sum(saturating_product(slice.chips, Chip::thread_processes(slice.chip)),
                        saturating_sum(infeeds, kCollectiveEngine));
}

SliceModel::SliceModel(const sc_core::sc_module_name& name, const config::SliceSpec& slice,
                       const ClockDomain& clock, const SystemOptions& options, StatGroup& stats,
                       std::function<void(const std::string&)> fail)
    : sc_module(name), map_(slice) {
  numerics = std::make_unique<NumericsWorker>(slice.cores, options.numerics_thread);
  collectives = std::make_unique<CollectiveEngine>("collectives", slice, clock, stats, fail);
  if (options.sink != nullptr) collectives->observe(options.sink);
  const ModelSettings settings{
      &slice,       &clock,          options.timing_only, options.mxu_policy,
      options.sink, std::move(fail), collectives.get(),   numerics.get()};
  for (uint32_t c = 0; c < slice.chips; ++c)
    chips.push_back(std::make_unique<Chip>(str_cat("chip", c).c_str(), settings, ChipId{c}, stats));
  std::vector<CollectiveEngine::MemberHbm> hbm;  // by core
  for (uint32_t c = 0; c < map_.cores(); ++c) {
    Core& member = core(CoreId{c});
    hbm.push_back({&member.hbm(), &member.context().shadow_flag()});
  }
  collectives->set_hbm(std::move(hbm));
  collectives->set_numerics(numerics.get());
  std::vector<HostLink*> links;
  for (auto& chip : chips) links.push_back(&chip->host_link());
  for (uint32_t h = 0; h < std::max<uint32_t>(slice.hosts, 1); ++h) {
    infeeds.push_back(std::make_unique<HostInfeed>(
        (h == 0 ? std::string("host_infeed") : str_cat("host", h, "_infeed")).c_str(), clock, links,
        map_));
  }
  restart = std::make_unique<ProcessRestart>("restart", *this);
}

absl::Status SliceModel::abandon_run() {
  collectives->abandon_run();
  for (auto& chip : chips) chip->abandon_run();
  for (auto& infeed : infeeds) infeed->abandon_run();
  return restart->restart();
}

}  // namespace tpusim::sim
