#pragma once
// What a Core needs from its Chip and the System when it is built.

#include <cstdint>
#include <functional>
#include <string>

#include "configs/slice_spec.h"
#include "sim/clock.h"
#include "sim/memory/memory.h"
#include "sim/timing/hbm_timing.h"
#include "traces/sink.h"

namespace tpusim::sim {

struct CoreOptions {
  uint32_t core = 0;
  uint32_t chip = 0;
  uint32_t core_on_chip = 0;
  const config::SliceSpec* slice = nullptr;
  const ClockDomain* clock = nullptr;
  bool timing_only = false;
  std::string mxu_policy;
  traces::Sink* sink = nullptr;
  Memory* hbm = nullptr;
  HbmTiming* hbm_timing = nullptr;
  sc_core::sc_event* outfeed_pushed = nullptr;
  std::function<void(const std::string&)> fail;
};

}  // namespace tpusim::sim
