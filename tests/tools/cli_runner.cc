#include "tests/tools/cli_runner.h"

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tpusim::cli::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CliResult run_tpusim(const std::vector<std::string>& args, const std::string& cwd,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const RunLimits& limits) {
  // stdout and stderr go to temp files: no pipe can fill up and block the child.
  const auto dir = std::filesystem::temp_directory_path();
  std::string out_path = (dir / "tpusim-cli-out-XXXXXX").string();
  std::string err_path = (dir / "tpusim-cli-err-XXXXXX").string();
  const int out_fd = mkstemp(out_path.data());
  const int err_fd = mkstemp(err_path.data());
  CliResult result;
  if (out_fd < 0 || err_fd < 0) return result;

  std::vector<std::string> argv_storage = {TPUSIM_CLI};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    if (limits.address_space_bytes > 0 && !kUnderSanitizer) {
      const rlimit limit{limits.address_space_bytes, limits.address_space_bytes};
      if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(125);
    }
    if (limits.file_size_bytes > 0) {
      const rlimit limit{limits.file_size_bytes, limits.file_size_bytes};
      signal(SIGXFSZ, SIG_IGN);
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(125);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(out_fd);
  close(err_fd);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return result;
}

}  // namespace tpusim::cli::testing
