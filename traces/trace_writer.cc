#include "traces/trace_writer.h"

#include "common/strings.h"
#include "traces/chrome_json_writer.h"
#include "traces/perfetto_writer.h"

namespace tpusim::traces {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

absl::StatusOr<TraceFormat> trace_format_of(const std::string& path) {
  if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace"))
    return TraceFormat::kPerfetto;
  if (ends_with(path, ".json")) return TraceFormat::kChromeJson;
  return absl::InvalidArgumentError(
      str_cat("trace file ", path,
              ": the extension names the format: .pftrace or .perfetto-trace (Perfetto protobuf) "
              "or .json (Chrome Trace Event JSON)"));
}

absl::StatusOr<std::unique_ptr<TraceWriter>> open_trace_writer(const std::string& path) {
  auto format = trace_format_of(path);
  if (!format.ok()) return format.status();
  return *format == TraceFormat::kPerfetto ? open_perfetto_writer(path)
                                           : open_chrome_json_writer(path);
}

}  // namespace tpusim::traces
