#pragma once
// The top-level SystemC module of a System (sim/system.h): the slice's chips, the collective
// engine that runs their collectives, the numerics worker their MXUs share, and one infeed
// thread per host. Built once, when the System is.

#include <functional>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "configs/slice_spec.h"
#include "sim/chip/chip.h"
#include "sim/chip/host_infeed.h"
#include "sim/clock.h"
#include "sim/core_map.h"
#include "sim/net/collective_engine.h"
#include "sim/stats/stat_group.h"
#include "sim/system.h"
#include "sim/units/numerics_worker.h"

namespace tpusim::sim {

class SliceModel : public sc_core::sc_module {
 public:
  // `fail` stops the run with an error naming core and instruction.
  SliceModel(const sc_core::sc_module_name& name, const config::SliceSpec& slice,
             const ClockDomain& clock, const SystemOptions& options, StatGroup& stats,
             std::function<void(const std::string&)> fail);
  // The worker's jobs use the chips' units: finish them first.
  ~SliceModel() override { numerics->drain(); }

  const CoreMap& core_map() const { return map_; }
  Chip& chip(ChipId chip) { return *chips[index(chip)]; }
  Core& core(CoreId core) { return chip(map_.chip_of(core)).core(map_.core_on_chip(core)); }
  HostLink& host_link_of(CoreId core) { return chip(map_.chip_of(core)).host_link(); }

  std::unique_ptr<NumericsWorker> numerics;
  std::unique_ptr<CollectiveEngine> collectives;
  std::vector<std::unique_ptr<Chip>> chips;
  std::vector<std::unique_ptr<HostInfeed>> infeeds;  // one per host

 private:
  CoreMap map_;
};

}  // namespace tpusim::sim
