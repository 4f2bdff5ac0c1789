#pragma once
// Runs the real tpusim executable and captures its exit status, stdout and stderr.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tpusim::cli::testing {

struct CliResult {
  int exit_code = -1;  // -1 when the process did not exit normally (a crash)
  std::string out;
  std::string err;
};

// Runs `tpusim args...` with no standard input, from `cwd` when it is not empty, with the
// environment variables `env` (NAME, value) set on top of this process's, and with its address
// space limited to `address_space_bytes` when that is not 0 (`ulimit -v`: a host whose memory
// runs out).
CliResult run_tpusim(const std::vector<std::string>& args, const std::string& cwd = "",
                     const std::vector<std::pair<std::string, std::string>>& env = {},
                     uint64_t address_space_bytes = 0);

}  // namespace tpusim::cli::testing
