#pragma once
// Reads a trace file tpusim wrote (Perfetto protobuf or Chrome JSON, by extension) back into
// tracks, slices and counter samples: what `tpusim analyze` and the tests work from. Errors
// name the file and the packet (with its byte offset) or event that is wrong.

#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "traces/recording_sink.h"

namespace tpusim::traces {

absl::StatusOr<std::unique_ptr<RecordingSink>> read_trace(const std::string& path);  // .xplane.pb: read_xspace

}  // namespace tpusim::traces
