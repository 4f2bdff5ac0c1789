#pragma once
// What the hostile-input tests share (cli_hostile_inputs_test.cc and its ii, iii and iv): a fresh
// scratch folder, files written byte for byte, Fashion-MNIST-style records, and a refusal's
// message.
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/data/example.h"
#include "runtime/data/tfrecord.h"
#include "tests/tools/cli_runner.h"

namespace tpusim::cli::testing {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// An empty folder of the system's temporary one, named for the test and this process.
inline std::filesystem::path hostile_scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tpusim-hostile-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Fashion-MNIST-style records in `dir` (train-00000-of-00001.tfrecord and t10k-...): `count`
// examples each, example i an image_raw of `image_bytes` bytes of value i and label label_of(i).
inline void write_mnist_records(const std::filesystem::path& dir, int count, size_t image_bytes,
                                const std::function<int64_t(int)>& label_of) {
  for (const char* prefix : {"train", "t10k"}) {
    auto w = runtime::data::TFRecordWriter::open(
        (dir / (std::string(prefix) + "-00000-of-00001.tfrecord")).string());
    ASSERT_TRUE(w.ok()) << w.status();
    for (int i = 0; i < count; ++i) {
      runtime::data::ExampleBuilder b;
      b.bytes("image_raw", {std::string(image_bytes, static_cast<char>(i))})
          .ints("label", {label_of(i)});
      ASSERT_TRUE((*w)->write(b.serialize()).ok());
    }
    ASSERT_TRUE((*w)->close().ok());
  }
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The refusal's message: the command must fail cleanly (exit 1 or 2, never a signal), under an
// address-space limit when `address_space` is not 0.
inline std::string refusal(const std::vector<std::string>& args, uint64_t address_space = 0) {
  const auto r = run_tpusim(args, "", {}, RunLimits{address_space, 0});
  EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << "exit " << r.exit_code << ": " << r.err;
  return r.err;
}

}  // namespace tpusim::cli::testing
