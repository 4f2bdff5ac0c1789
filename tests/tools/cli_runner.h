#pragma once
// Runs the real tpusim executable and captures its exit status, stdout and stderr.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/under_sanitizer.h"

namespace tpusim::cli::testing {

// Under ASan or TSan (tests/under_sanitizer.h) run_tpusim leaves address_space_bytes unset: no
// `ulimit -v` can hold the sanitizer's shadow memory; a test that needs the limit itself skips.
using tpusim::testing::kUnderSanitizer;

struct CliResult {
  int exit_code = -1;  // -1 when the process did not exit normally (a crash)
  std::string out;
  std::string err;
};

// Limits on the child, each off at 0.
struct RunLimits {
  uint64_t address_space_bytes = 0;  // `ulimit -v`: a host whose memory runs out (not under ASan)
  uint64_t file_size_bytes = 0;      // `ulimit -f`: a disk that fills up (SIGXFSZ ignored, so a
                                     // write past it fails with EFBIG as on a full disk)
};

using Environment = std::vector<std::pair<std::string, std::string>>;

// The tpusim executable under test.
std::string tpusim_path();

// A program started with start_program, running until finish_program.
struct StartedProgram {
  int pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_path, err_path;
};

// Starts the program at `path` with `args`, no standard input, from `cwd` when it is not empty,
// with the environment variables `env` (NAME, value) set on top of this process's, under
// `limits`; its stdout and stderr go to files finish_program reads.
StartedProgram start_program(const std::string& path, const std::vector<std::string>& args,
                             const std::string& cwd = "", const Environment& env = {},
                             const RunLimits& limits = {});
// Waits for it to end: its exit status and output.
CliResult finish_program(StartedProgram& started);

// Runs the program at `path` as start_program would, and waits for it.
CliResult run_program(const std::string& path, const std::vector<std::string>& args,
                      const std::string& cwd = "", const Environment& env = {});

// Runs `tpusim args...` as start_program would, and waits for it.
CliResult run_tpusim(const std::vector<std::string>& args, const std::string& cwd = "",
                     const Environment& env = {}, const RunLimits& limits = {});

}  // namespace tpusim::cli::testing
