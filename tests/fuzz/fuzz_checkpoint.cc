// Checkpoint files on any bytes: loaded, every record and size checked.
#include "estimator/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tpusim::fuzz::write_input(data, size, "model.ckpt-1.tpuckpt");
  (void)tpusim::estimator::load_checkpoint(path);
  return 0;
}
