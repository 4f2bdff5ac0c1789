#pragma once
// Runs this very executable again as a child process: `tpusim tune` and `tpusim sweep` run
// each job in a process of its own (SystemC elaborates one slice per process), with its output
// in a log file.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::studies {

struct ChildRun {
  int exit_code = 0;
  std::string log_path;
};

// Starts the program at `path` with `argv` (argv[0] first), stdin from /dev/null and stdout
// and stderr appended to `log_path` (stdout into `stdout_path` instead when one is given, which
// it truncates); returns its pid.
absl::StatusOr<int> spawn_program(const std::string& path, const std::vector<std::string>& argv,
                                  const std::string& log_path, const std::string& stdout_path = "");
// Starts `tpusim args...` as spawn_program does; returns its pid. The child dies with this
// process (die_with_parent_if_asked): a study that is killed leaves no point running.
absl::StatusOr<int> spawn_self(const std::vector<std::string>& args, const std::string& log_path,
                               const std::string& stdout_path = "");
// In a process spawn_self started (TPUSIM_PARENT_PID names its parent): asks the kernel for
// SIGKILL when the parent dies, and ends at once if it already has. main() calls it first.
void die_with_parent_if_asked();
// A child that has ended, without waiting: its pid and exit code, or none. An error when this
// process has no child at all (call it while children run).
absl::StatusOr<std::optional<std::pair<int, int>>> poll_any_child();
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

}  // namespace tpusim::studies
