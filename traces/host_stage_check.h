#pragma once
// A host stage's batches in a trace are bounded by the stage's threads: each thread works one
// batch at a time, so no instant has more of a stage's batch slices open than its threads (the
// `threads` its track declares; a profile's stage has a line per thread). A trace that breaks
// this was not written by one run (every slice repeated, two runs merged), and its stage
// figures would count batches twice: the analyzer refuses it, naming the stage and the instant.

#include <absl/status/status.h>

#include "traces/recording_sink.h"

namespace tpusim::traces {

// OK, or InvalidArgument: "host stage 'map' (1 thread) has 2 batches at once at 0.012 s ...".
absl::Status check_host_stage_batches(const RecordingSink& trace);

}  // namespace tpusim::traces
