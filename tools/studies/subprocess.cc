#include "tools/studies/subprocess.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/strings.h"

extern char** environ;

namespace tpusim::studies {

namespace {

constexpr char kParentPidVariable[] = "TPUSIM_PARENT_PID";

// This process's environment with `extra` ("NAME=value") in place of any NAME already there.
std::vector<std::string> environment_with(const std::string& extra) {
  const std::string name = extra.substr(0, extra.find('=') + 1);
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind(name, 0) != 0) out.emplace_back(*e);
  }
  out.push_back(extra);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

absl::StatusOr<int> spawn_with_environment(const std::string& path,
                                           const std::vector<std::string>& argv_in,
                                           const std::string& log_path,
                                           const std::string& stdout_path, char** envp) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (stdout_path.empty()) {
    posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  std::vector<std::string> argv_strings = argv_in;
  std::vector<char*> argv = c_strings(argv_strings);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(str_cat("cannot start ", path, ": ", std::strerror(rc)));
  }
  return static_cast<int>(pid);
}

}  // namespace

absl::StatusOr<int> spawn_program(const std::string& path, const std::vector<std::string>& argv,
                                  const std::string& log_path, const std::string& stdout_path) {
  return spawn_with_environment(path, argv, log_path, stdout_path, environ);
}

absl::StatusOr<int> spawn_self(const std::vector<std::string>& args, const std::string& log_path,
                               const std::string& stdout_path) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return absl::InternalError("cannot find this executable (/proc/self/exe)");
  self[n] = 0;
  std::vector<std::string> argv = {"tpusim"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = environment_with(str_cat(kParentPidVariable, "=", ::getpid()));
  std::vector<char*> envp = c_strings(env);
  return spawn_with_environment(self, argv, log_path, stdout_path, envp.data());
}

void die_with_parent_if_asked() {
  const char* parent = std::getenv(kParentPidVariable);
  if (parent == nullptr) return;
  const long expected = std::strtol(parent, nullptr, 10);
  ::unsetenv(kParentPidVariable);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died before the request: then this process is already an orphan.
  if (::getppid() != static_cast<pid_t>(expected)) ::raise(SIGKILL);
}

namespace {

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

absl::StatusOr<std::optional<std::pair<int, int>>> poll_any_child() {
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) < 0) {
    if (errno == ECHILD) {
      // Called while points run: something else reaped them (SIGCHLD ignored, say).
      return absl::InternalError("waitpid: the points' processes are gone (reaped elsewhere)");
    }
    if (errno != EINTR) return absl::InternalError(str_cat("waitpid: ", std::strerror(errno)));
  }
  if (pid == 0) return std::nullopt;
  return std::optional<std::pair<int, int>>(std::pair<int, int>{pid, exit_code_of(status)});
}

absl::StatusOr<std::pair<int, int>> wait_any_child() {
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, 0)) < 0) {
    if (errno != EINTR) return absl::InternalError(str_cat("waitpid: ", std::strerror(errno)));
  }
  return std::pair<int, int>{static_cast<int>(pid), exit_code_of(status)};
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<int> wait_child(int pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(str_cat("waitpid: ", std::strerror(errno)));
  }
  return exit_code_of(status);
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

}  // namespace tpusim::studies
