#pragma once
// The figures of one run (System::report): per core its cycles, its units' busy and stall
// cycles, MXU utilisation, feed waits, VMEM high-water mark and per graph op profile; per chip
// its HBM traffic and its ops' profile over its cores. Callers read the fields; to_json() gives
// the same figures as JSON for dumps, under names tests and scripts read by key. The stats tree
// (System::stats()) holds every counter; this is the part a run's reader wants.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/ids.h"
#include "sim/stats/op_profile.h"

namespace tpusim::sim {

// One unit of a core (a DMA engine, an MXU, the vector unit, infeed, outfeed, the collective
// unit) over the run.
struct UnitReport {
  std::string name;           // the unit's module name: "dma0", "mxu1", "vpu", "ici", ...
  uint64_t busy_cycles = 0;   // cycles it was working
  uint64_t stall_cycles = 0;  // cycles the instruction at its head waited for sync flags
  double utilization = 0;     // busy_cycles over the core's cycles (0 when the core took none)
};

struct CoreReport {
  CoreId core{};
  bool shadow = false;  // ran a folded replica's collectives only (isa CoreProgram.shadow)
  uint64_t cycles = 0;  // from the run's start to this core's halt
  // MACs done over what the core's MXUs could do in `cycles` (0 when the core took none).
  double mxu_utilization = 0;
  uint64_t infeed_wait_cycles = 0;     // the infeed unit found the infeed queue empty (starved)
  uint64_t outfeed_wait_cycles = 0;    // the outfeed unit waited for room in the outfeed queue
  uint64_t vmem_high_water_bytes = 0;  // highest VMEM byte any instruction touched, plus one
  std::vector<UnitReport> units;       // in the core's order: DMA engines, MXUs, vpu, feeds, ici
  std::vector<OpFigures> ops;          // per graph op of the core's program, in origin order

  // The unit named `name`, or null when the core has none.
  const UnitReport* unit(std::string_view name) const;
};

struct ChipReport {
  ChipId chip{};
  double hbm_bytes = 0;                 // moved to and from the chip's HBM by DMA
  double hbm_achieved_bytes_per_s = 0;  // hbm_bytes over the run's seconds
  double hbm_peak_bytes_per_s = 0;      // the chip's HBM bandwidth (the slice's config)
  // Per graph op over the chip's cores that ran (chip_figures: their spans' union).
  std::vector<OpFigures> ops;
};

struct RunReport {
  uint64_t cycles = 0;            // the run's, from its start to the last core's halt
  double seconds = 0;             // cycles at the cores' clock
  std::vector<CoreReport> cores;  // the cores the program named, in its order
  std::vector<ChipReport> chips;  // the chips whose HBM moved bytes, in chip order

  // The chip's report, or null when its HBM moved nothing.
  const ChipReport* chip(ChipId chip) const;

  // {"cycles", "seconds", "cores": [{"core", "shadow", "cycles", "mxu_utilization",
  // "infeed_wait_cycles", "outfeed_wait_cycles", "vmem_high_water_bytes", "units": {name:
  // {"busy_cycles", "stall_cycles", "utilization"}}, "ops": [...]}], "chips": [{"chip",
  // "hbm_bytes", "hbm_achieved_bytes_per_s", "hbm_peak_bytes_per_s", "ops": [...]}]}, each op
  // {"label", "op", "flops", "mxu_flops", "hbm_bytes", "ici_bytes", "cycles", "instructions"}.
  // Unit cycles are JSON floats (as the stats tree has them); the other cycles are integers.
  nlohmann::ordered_json to_json() const;
};

}  // namespace tpusim::sim
