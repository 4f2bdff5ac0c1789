#pragma once
// The Chrome Trace Event JSON writer (see trace_writer.h): {"traceEvents": [...]} with process
// and thread names as "M" events, slices as complete "X" events and counters as "C" events,
// streamed one event per line.

#include <memory>
#include <string>

#include "traces/trace_writer.h"

namespace tpusim::traces {

absl::StatusOr<std::unique_ptr<TraceWriter>> open_chrome_json_writer(const std::string& path);

}  // namespace tpusim::traces
