// IDX files (plain or GZIP) on any bytes.
#include "runtime/data/idx.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tpusim::runtime::data::read_idx(tpusim::fuzz::write_input(data, size, "array.idx"));
  return 0;
}
