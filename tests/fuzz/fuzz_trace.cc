// What `tpusim analyze` and `tpusim compare-profile` run: the trace reader (Chrome JSON, Perfetto
// protobuf or an XProf profile's XSpace; the first byte modulo 3 chooses), then the step analysis
// of what it read, in both of the forms the command prints; for a profile also its ops
// (analyze's list) and the profile compared with itself (compare-profile's report).
#include "tests/fuzz/fuzz_util.h"
#include "traces/analyzer.h"
#include "traces/profile_compare.h"
#include "traces/trace_reader.h"
#include "traces/xspace_ops.h"

namespace {

void run_op_profile(const std::string& path) {
  auto ops = tpusim::traces::read_op_profile(path);
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
  if (kind == 2) run_op_profile(path);
  auto trace = tpusim::traces::read_trace(path);
  if (!trace.ok()) return 0;
  auto analysis = tpusim::traces::analyze(**trace);
  if (!analysis.ok()) return 0;
  (void)analysis->to_text();
  (void)analysis->to_json().dump();
  return 0;
}
