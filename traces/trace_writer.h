#pragma once
// Trace files: a Sink that streams what it receives to disk as it arrives, so a long run's
// trace never sits in memory. The format follows the file's extension:
//   .pftrace / .perfetto-trace  Perfetto protobuf (ui.perfetto.dev; the primary format)
//   .json                       Chrome Trace Event JSON (chrome://tracing, Perfetto too)
// Times are simulated picoseconds in, nanoseconds out (Perfetto's resolution); Chrome JSON
// writes microseconds with three decimals, the same nanoseconds.

#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "traces/sink.h"

namespace tpusim::traces {

class TraceWriter : public Sink {
 public:
  // Flushes and closes the file; the first write error of the run, naming the file, if any.
  virtual absl::Status close() = 0;
  // Bytes written so far.
  virtual uint64_t bytes_written() const = 0;
};

enum class TraceFormat { kPerfetto, kChromeJson };

// The format a path's extension names; InvalidArgument naming the path and the extensions
// understood otherwise.
absl::StatusOr<TraceFormat> trace_format_of(const std::string& path);

// Opens `path` for writing in the format its extension names.
absl::StatusOr<std::unique_ptr<TraceWriter>> open_trace_writer(const std::string& path);

}  // namespace tpusim::traces
