#pragma once
// What one run's trace cannot hold, checked before the analyzer counts anything, so that a trace
// that is not one run's (its slices repeated, two runs merged, hand-edited steps) is refused
// instead of read into different figures:
// - a host stage's batches are bounded by its threads: each thread works one batch at a time,
//   so no instant has more of a stage's batch slices open than its threads (the `threads` its
//   track declares; a profile's stage has a line per thread);
// - a core's steps track holds `step N` slices (N a whole number, written so), each step once,
//   each lasting some time and each ending before the next begins.

#include <cstdint>
#include <string>

#include <absl/status/status.h>

#include "traces/recording_sink.h"

namespace tpusim::traces {

// OK, or InvalidArgument: "host stage 'map' (1 thread) has 2 batches at once at 0.012 s ...".
absl::Status check_host_stage_batches(const RecordingSink& trace);

// N of a steps-track slice named exactly "step N" (N a whole number, as from_chars reads it:
// no sign, space or fraction), or -1.
int64_t step_of_slice(const std::string& name);

// OK, or InvalidArgument naming the chip, core and step: "chip 0 core 1's step 2 appears twice".
absl::Status check_core_steps(const RecordingSink& trace);

}  // namespace tpusim::traces
