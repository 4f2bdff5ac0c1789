// System::report: a run's figures read from the slice's modules into a RunReport.
#include "sim/slice_model.h"
#include "sim/system.h"

namespace tpusim::sim {

namespace {

// `core`'s figures over a run in which it took `run.cycles` cycles.
CoreReport core_report(Core& core, const CoreRun& run, const config::CoreSpec& spec) {
  const double cycles = static_cast<double>(run.cycles);
  CoreReport report;
  report.core = run.core;
  report.shadow = run.shadow;
  report.cycles = run.cycles;
  for (const auto& unit : core.units()) {
    const double busy = static_cast<double>(unit->busy_cycles());
    report.units.push_back(UnitReport{unit->basename(), unit->busy_cycles(), unit->stall_cycles(),
                                      cycles > 0 ? busy / cycles : 0.0});
  }
  double macs = 0;
  for (const MxuUnit* m : core.mxus()) macs += static_cast<double>(m->macs());
  const double peak_macs =
      static_cast<double>(spec.mxu_count) * spec.mxu_rows * spec.mxu_cols * cycles;
  report.mxu_utilization = peak_macs > 0 ? macs / peak_macs : 0.0;
  report.infeed_wait_cycles = core.infeed_unit().wait_cycles();
  report.outfeed_wait_cycles = core.outfeed_unit().wait_cycles();
  report.vmem_high_water_bytes = core.vmem().high_water();
  report.ops = core.context().ops().figures();
  return report;
}

}  // namespace

RunReport System::report(const RunResult& run) {
  RunReport report;
  report.cycles = run.cycles();
  report.seconds = static_cast<double>(run.cycles()) / clock_.frequency_hz();
  for (const CoreRun& cr : run.cores) {
    report.cores.push_back(core_report(model_->core(cr.core), cr, slice_->chip.core));
  }
  for (uint32_t c = 0; c < core_map_.chips(); ++c) {
    const ChipId chip{c};
    const double bytes = model_->chip(chip).hbm_timing().bytes_served();
    if (bytes == 0) continue;
    std::vector<std::vector<OpFigures>> chip_cores;
    for (const CoreReport& core : report.cores) {
      if (core_map_.chip_of(core.core) == chip) chip_cores.push_back(core.ops);
    }
    const double seconds = report.seconds;
    report.chips.push_back(ChipReport{chip, bytes, seconds > 0 ? bytes / seconds : 0.0,
                                      slice_->chip.hbm.bandwidth_bytes_per_s,
                                      chip_figures(chip_cores)});
  }
  return report;
}

}  // namespace tpusim::sim
