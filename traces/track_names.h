#pragma once
// How tracks are named in trace files, and read back: every writer and reader uses these, so a
// trace written as Perfetto or Chrome JSON reads back into the same TrackInfo.
//
//   process  "chip 0" (pid 2 + chip) or "host" (pid 1)
//   thread   "core 1 / mxu0", "chip / ici" (no core), "host / map [4 threads]", "host / loop"
//   counter  the thread label of its place plus the counter's name, e.g. "core 0 / hbm_bandwidth"

#include <string>

#include <absl/status/statusor.h>

#include "traces/sink.h"

namespace tpusim::traces {

inline constexpr int kHostPid = 1;
int pid_of(const TrackInfo& info);                 // kHostPid for host tracks, 2 + chip otherwise
std::string process_label(const TrackInfo& info);  // "chip 0" or "host"
std::string track_label(const TrackInfo& info);    // the thread or counter name above

// The TrackInfo a label names; `pid` says which process it sits in. `kind` is what the file
// says the track is (slices or counter). InvalidArgument for a label not of the forms above.
absl::StatusOr<TrackInfo> parse_track_label(TrackInfo::Kind kind, int pid, const std::string& label,
                                            const std::string& unit);

}  // namespace tpusim::traces
