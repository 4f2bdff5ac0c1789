#pragma once
// What the hostile-input tests share (cli_hostile_inputs_test.cc, cli_hostile_inputs_ii_test.cc):
// a fresh scratch folder, files written byte for byte, and a refusal's message.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

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
