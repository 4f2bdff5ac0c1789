#pragma once
// The functional side of a started collective: reads every member's src out of its HBM, computes
// the results the plan makes (collective_numerics.h) and writes each member's dst. Values only;
// the time the data takes to move is the chunk schedule's (chunk_schedule.h).

#include <cstdint>
#include <functional>

#include "sim/memory/memory.h"
#include "sim/net/collective_rendezvous.h"
#include "sim/net/ring_plan.h"
#include "sim/units/numerics_worker.h"

namespace tpusim::sim {

// `memory_of(core)`: the core's chip's HBM. `numerics` (may be null): the slice's worker, whose
// queued DMAs may still write what the collective reads or touch what it writes; only those are
// waited for, so the members' other work goes on.
void write_collective_results(const CollectiveGroup& group, const CollectivePlan& plan,
                              const std::function<Memory&(CoreId core)>& memory_of,
                              NumericsWorker* numerics);

}  // namespace tpusim::sim
