#include "tools/tpusim/subprocess.h"

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/strings.h"

extern char** environ;

namespace tpusim::cli {

absl::StatusOr<int> spawn_self(const std::vector<std::string>& args, const std::string& log_path) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return absl::InternalError("cannot find this executable (/proc/self/exe)");
  self[n] = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> argv_strings = {"tpusim"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(str_cat("cannot start ", self, ": ", std::strerror(rc)));
  }
  return static_cast<int>(pid);
}

absl::StatusOr<int> wait_child(int pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(str_cat("waitpid: ", std::strerror(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

absl::StatusOr<int> run_self(const std::vector<std::string>& args, const std::string& log_path) {
  auto pid = spawn_self(args, log_path);
  if (!pid.ok()) return pid.status();
  return wait_child(*pid);
}

std::string log_tail(const std::string& log_path, int lines) {
  std::ifstream in(log_path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "  | " + l + "\n";
  return out;
}

}  // namespace tpusim::cli
