#pragma once
// Runs this very executable again as a child process: `tpusim tune` and `tpusim sweep` run
// each job in a process of its own (SystemC elaborates one slice per process), with its output
// in a log file.

#include <string>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::cli {

struct ChildRun {
  int exit_code = 0;
  std::string log_path;
};

// Starts the program at `path` with `argv` (argv[0] first), stdin from /dev/null and stdout
// and stderr appended to `log_path`; returns its pid.
absl::StatusOr<int> spawn_program(const std::string& path, const std::vector<std::string>& argv,
                                  const std::string& log_path);
// Starts `tpusim args...` with stdout and stderr appended to `log_path`; returns its pid.
absl::StatusOr<int> spawn_self(const std::vector<std::string>& args, const std::string& log_path);
// Waits for a child spawn_self started; its exit code (128 + signal when killed).
absl::StatusOr<int> wait_child(int pid);
// Waits for any child to end: its pid and exit code.
absl::StatusOr<std::pair<int, int>> wait_any_child();
// The executable `name` in a folder of $PATH, "" when there is none.
std::string find_in_path(const std::string& name);
// spawn_self then wait_child.
absl::StatusOr<int> run_self(const std::vector<std::string>& args, const std::string& log_path);
// The last `lines` lines of a log, for error messages.
std::string log_tail(const std::string& log_path, int lines = 8);

}  // namespace tpusim::cli
