#pragma once
// The Perfetto protobuf writer (see trace_writer.h): one TracePacket per track descriptor,
// slice begin, slice end and counter value, appended to the file as it arrives.

#include <memory>
#include <string>

#include "traces/trace_writer.h"

namespace tpusim::traces {

absl::StatusOr<std::unique_ptr<TraceWriter>> open_perfetto_writer(const std::string& path);

}  // namespace tpusim::traces
