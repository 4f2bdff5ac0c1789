// The trace reader behind `tpusim analyze`: Perfetto protobuf or Chrome JSON (the first byte
// chooses), then the step analysis of what it read.
#include "tests/fuzz/fuzz_util.h"
#include "traces/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const char* name = data[0] % 2 == 0 ? "trace.json" : "trace.pftrace";
  (void)tpusim::traces::read_trace(tpusim::fuzz::write_input(data + 1, size - 1, name));
  return 0;
}
