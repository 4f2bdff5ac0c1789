// Saved models on any bytes: the folder's saved_model.pb fuzzed beside a valid, empty weights
// file, then loaded (the graph rebuilt and checked, the signature and predictions against it).
#include <filesystem>

#include "estimator/checkpoint.h"
#include "estimator/saved_model.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d =
        std::filesystem::path(tpusim::fuzz::write_input(nullptr, 0, "saved")).string() + "-dir";
    std::filesystem::create_directories(d);
    (void)tpusim::estimator::write_checkpoint(d + "/variables.tpuckpt", 0, {});
    return d;
  }();
  const std::string pb = tpusim::fuzz::write_input(data, size, "saved_model.pb");
  std::error_code ec;
  std::filesystem::copy_file(pb, dir + "/saved_model.pb",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return 0;
  (void)tpusim::estimator::load_saved_model(dir);
  return 0;
}
