#pragma once
// Runs the real tpusim executable and captures its exit status, stdout and stderr.

#include <string>
#include <vector>

namespace tpusim::cli::testing {

struct CliResult {
  int exit_code = -1;  // -1 when the process did not exit normally (a crash)
  std::string out;
  std::string err;
};

// Runs `tpusim args...` with no standard input, from `cwd` when it is not empty.
CliResult run_tpusim(const std::vector<std::string>& args, const std::string& cwd = "");

}  // namespace tpusim::cli::testing
