#pragma once
// The threads the environment asks tpusim's OpenMP regions for (OMP_NUM_THREADS), checked before
// any region starts: libgomp asked for a team of 65,536 crashes in GOMP_parallel (SIGSEGV), where
// no status can be returned.

#include <string>

#include <absl/status/status.h>

namespace tpusim::cli {

// The most threads a team may have: the bound of the CLI's own thread flags (--map-threads and
// the like). tpusim's OpenMP regions are compute-bound on the host's cores, so a team past the
// cores only time-slices them, and no figure depends on the team's size.
inline constexpr int kMaxOpenMpThreads = 1024;

// OK, or InvalidArgument naming the variable and the value: OMP_NUM_THREADS is a comma list of
// team sizes (one per nesting level), each an integer 1..kMaxOpenMpThreads. `value`: the
// variable's text, or null when it is not set.
absl::Status check_omp_num_threads(const char* value);

}  // namespace tpusim::cli
