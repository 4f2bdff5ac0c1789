// What `tpusim analyze` runs: the trace reader (Chrome JSON, Perfetto protobuf or an XProf
// profile's XSpace; the first byte modulo 3 chooses), then the step analysis of what it read, in
// both of the forms the command prints.
#include "tests/fuzz/fuzz_util.h"
#include "traces/analyzer.h"
#include "traces/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const char* names[] = {"trace.json", "trace.pftrace", "trace.xplane.pb"};
  const char* name = names[data[0] % 3];
  auto trace = tpusim::traces::read_trace(tpusim::fuzz::write_input(data + 1, size - 1, name));
  if (!trace.ok()) return 0;
  auto analysis = tpusim::traces::analyze(**trace);
  if (!analysis.ok()) return 0;
  (void)analysis->to_text();
  (void)analysis->to_json().dump();
  return 0;
}
