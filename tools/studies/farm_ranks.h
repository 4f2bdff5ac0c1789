#pragma once
// The two sides of a farm under MPI (point_farm.h): rank 0, which hands out the points, runs its
// own share and collects every result; and each other rank, which asks for points and runs them.

#include <string>
#include <vector>

#include "tools/studies/mpi_world.h"
#include "tools/studies/point_farm.h"

namespace tpusim::studies::farm {

// Rank 0, or the one process when `world` is null. `marker` is a file it makes in the study
// folder for the duration, so that a rank that sees it knows that folder is shared ("": none).
// `*lost` says whether it gave up a rank for lost.
absl::Status coordinate(MpiWorld* world, const std::vector<FarmJob>& jobs,
                        const FarmOptions& options, const PointFarm::OnDone& on_done,
                        const std::string& marker, bool* lost);

// Any other rank: its exit code. `*lost_rank0` says whether it gave rank 0 up for lost.
int work(MpiWorld& world, const FarmOptions& options, bool* lost_rank0);

}  // namespace tpusim::studies::farm
