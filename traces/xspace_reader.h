#pragma once
// Reads an XProf profile (an XSpace, .xplane.pb) into the events the step analyzer reads, so
// `tpusim analyze` breaks down a profile's steps as it does a trace's. What it takes, laid out as
// XProf's converters read a TPU job (traces/xprof_profile.h writes the same):
//   - each `/device:TPU:N` plane as core N (a chip of its own: the profile does not say which
//     cores share a chip): its `Steps` line's events as the core's steps ("step K", K the event's
//     step number), and its `XLA Ops` events whose metadata's hlo_category is `infeed` as the
//     core's waits for input (a TPU's infeed op blocks until its batch arrives; XProf counts its
//     time as waiting for input, as the analyzer counts an infeed wait);
//   - the `/host:CPU` plane's lines named "STAGE thread N" (tpusim's host stages) as host stage
//     STAGE on as many threads as it has lines, each event a batch;
//   - in a profile with no TPU plane (XLA on the CPU, as JAX's profiler writes one), the host
//     plane's events with a `step_num` stat (StepTraceAnnotation's) as core 0's steps.
// The host's loop round trips are not in a profile, so none is counted. Errors name the file,
// the plane and the line or event that is wrong (an event whose metadata id names no metadata,
// a time past 10^15 ps); a plane of no kind it knows is passed over.

#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "traces/recording_sink.h"
#include "traces/xplane.pb.h"

namespace tpusim::traces {

// True for a path the XSpace reader takes: one ending ".xplane.pb".
bool is_xspace_path(const std::string& path);

absl::StatusOr<std::unique_ptr<RecordingSink>> read_xspace(const std::string& path);
// The same from an XSpace already parsed (xspace_ops.h's parse_xspace_file), `path` naming it in
// errors: a profile read once for both its steps and its ops.
absl::StatusOr<std::unique_ptr<RecordingSink>> analysis_events_of(const xprof::XSpace& space,
                                                                  const std::string& path);

}  // namespace tpusim::traces
