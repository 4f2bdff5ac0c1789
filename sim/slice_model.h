#pragma once
// The top-level SystemC module of a System (sim/system.h): the slice's chips, the collective
// engine that runs their collectives, the numerics worker their MXUs share, and one infeed
// thread per host. Built once, when the System is; after a failed run, abandon_run() brings it
// back to how it was built (simulated time and the bytes in memory aside).

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
#include "sim/process_restart.h"
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
  // The SystemC thread processes a model of `slice` elaborates: its chips', one infeed thread
  // per host and the collective engine's. System::create holds their stacks against the
  // address space before it builds anything.
  static uint64_t thread_processes(const config::SliceSpec& slice);
  // The worker's jobs use the chips' units: finish them first.
  ~SliceModel() override { numerics->drain(); }

  const CoreMap& core_map() const { return map_; }
  Chip& chip(ChipId chip) { return *chips[index(chip)]; }
  Core& core(CoreId core) { return chip(map_.chip_of(core)).core(map_.core_on_chip(core)); }
  HostLink& host_link_of(CoreId core) { return chip(map_.chip_of(core)).host_link(); }

  // After a failed run (sc_start has returned, the numerics drained): every module's queues,
  // flags and reservations cleared, then every pending notification cancelled and every thread
  // process restarted at its first wait. An error if the model is not idle afterwards.
  absl::Status abandon_run();

  std::unique_ptr<NumericsWorker> numerics;
  std::unique_ptr<CollectiveEngine> collectives;
  std::vector<std::unique_ptr<Chip>> chips;
  std::vector<std::unique_ptr<HostInfeed>> infeeds;  // one per host
  std::unique_ptr<ProcessRestart> restart;

 private:
  CoreMap map_;
};

}  // namespace tpusim::sim
