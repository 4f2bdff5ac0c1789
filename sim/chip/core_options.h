#pragma once
// What the modules of a slice are built with: the settings every module shares (from the
// System), and what a Core gets from its Chip.

#include <cstdint>
#include <functional>
#include <string>
#include <systemc>

#include "configs/slice_spec.h"
#include "sim/clock.h"
#include "sim/ids.h"
#include "sim/memory/memory.h"
#include "sim/timing/hbm_timing.h"
#include "sim/timing/mxu_policy.h"
#include "traces/sink.h"

namespace tpusim::sim {

class CollectiveEngine;
class NumericsWorker;

struct ModelSettings {
  const config::SliceSpec* slice = nullptr;
  const ClockDomain* clock = nullptr;
  bool timing_only = false;
  MxuPolicy mxu_policy = MxuPolicy::kTpu;
  traces::Sink* sink = nullptr;
  // Stops the run with an error message naming core and instruction.
  std::function<void(const std::string&)> fail;
  CollectiveEngine* collectives = nullptr;  // the slice's
  NumericsWorker* numerics = nullptr;       // the slice's
};

struct CoreOptions {
  ModelSettings settings;
  CoreId core{};  // its chip and place on it: CoreMap
  Memory* hbm = nullptr;
  HbmTiming* hbm_timing = nullptr;
  sc_core::sc_event* outfeed_pushed = nullptr;
};

}  // namespace tpusim::sim
