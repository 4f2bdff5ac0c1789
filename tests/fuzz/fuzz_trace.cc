// What `tpusim analyze` and `tpusim compare-profile` run: the trace reader (Chrome JSON, Perfetto
// protobuf or an XProf profile's XSpace; the first byte modulo 3 chooses), then the step analysis
// of what it read, in both of the forms the command prints; a profile, parsed once as analyze
// parses it, also gives its ops (analyze's list) and is compared with itself (compare-profile's
// report).
#include "tests/fuzz/fuzz_util.h"
#include "traces/analyzer.h"
#include "traces/profile_compare.h"
#include "traces/trace_reader.h"
#include "traces/xspace_ops.h"
#include "traces/xspace_reader.h"

namespace {

void run_analysis(const tpusim::traces::RecordingSink& trace) {
  auto analysis = tpusim::traces::analyze(trace);
  if (!analysis.ok()) return;
  (void)analysis->to_text();
  (void)analysis->to_json().dump();
}

void run_profile(const std::string& path) {
  auto space = tpusim::traces::parse_xspace_file(path);
  if (!space.ok()) return;
  auto events = tpusim::traces::analysis_events_of(*space, path);
  if (events.ok()) run_analysis(**events);
  auto ops = tpusim::traces::op_profile_of(*space, path);
  if (!ops.ok()) return;
  (void)ops->ops_text(0);
  (void)ops->to_json().dump();
  const auto comparison = tpusim::traces::compare_profiles(*ops, *ops);
  (void)comparison.to_text(0);
  (void)comparison.to_json().dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const char* names[] = {"trace.json", "trace.pftrace", "trace.xplane.pb"};
  const int kind = data[0] % 3;
  const std::string path = tpusim::fuzz::write_input(data + 1, size - 1, names[kind]);
  if (kind == 2) {
    run_profile(path);
    return 0;
  }
  auto trace = tpusim::traces::read_trace(path);
  if (trace.ok()) run_analysis(**trace);
  return 0;
}
