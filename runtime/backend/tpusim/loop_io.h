#pragma once
// What a device loop moves between the host and the simulated chips: each replica's state into
// its core's HBM share before the loop, every step's batches onto the hosts' infeed threads,
// and the outfed outputs and replica 0's variables back after it.

#include <cstdint>
#include <functional>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/tpusim/compiler.h"
#include "sim/system.h"

namespace tpusim::runtime::tpusim_backend {

// Replica r's compiled step (replica r runs on core r).
using StepOfReplica = std::function<const CompiledStep&(uint32_t replica)>;

// Persistent state of one replica into its core's HBM share on `chip`: constants, then
// variables.
absl::Status write_state(sim::System& system, const Graph& g, const CompiledStep& step,
                         sim::ChipId chip, const Variables& variables);

// Every step's batches for replicas 0 .. simulated-1 onto the hosts' infeed threads, which take
// each when the host's schedule says it is ready and tell the schedule when they took it. A
// schedule split by host (each host's pipelines feed its own chips) gives each host's thread its
// own part. Timing only, the entries carry their sizes and no data.
absl::Status queue_infeeds(sim::System& system, const std::vector<LoopStep>& steps,
                           uint32_t simulated, const StepOfReplica& step_for, bool timing_only);

// What replicas 0 .. simulated-1 outfed over `steps` steps, [step][replica]. A timing-only run's
// entries carry no data: its values stay zero.
absl::StatusOr<std::vector<std::vector<Outputs>>> receive_outputs(sim::System& system,
                                                                  uint32_t simulated,
                                                                  const StepOfReplica& step_for,
                                                                  size_t steps);

// Every variable of `g` read back from chip 0 (replica 0's HBM share) into `variables`.
absl::Status read_variables(sim::System& system, const Graph& g, const CompiledStep& first,
                            Variables* variables);

}  // namespace tpusim::runtime::tpusim_backend
