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
#include <gtest/gtest.h>
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

std::string tpusim_path() { return TPUSIM_CLI; }

StartedProgram start_program(const std::string& path, const std::vector<std::string>& args,
                             const std::string& cwd, const Environment& env,
                             const RunLimits& limits) {
  // stdout and stderr go to temp files: no pipe can fill up and block the child.
  const auto dir = std::filesystem::temp_directory_path();
  StartedProgram started;
  started.out_path = (dir / "tpusim-cli-out-XXXXXX").string();
  started.err_path = (dir / "tpusim-cli-err-XXXXXX").string();
  started.out_fd = mkstemp(started.out_path.data());
  started.err_fd = mkstemp(started.err_path.data());
  if (started.out_fd < 0 || started.err_fd < 0) {
    for (int fd : {started.out_fd, started.err_fd}) {
      if (fd >= 0) close(fd);
    }
    return started;
  }

  std::vector<std::string> argv_storage = {path};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, STDIN_FILENO);
    dup2(started.out_fd, STDOUT_FILENO);
    dup2(started.err_fd, STDERR_FILENO);
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
  started.pid = pid;
  return started;
}

CliResult finish_program(StartedProgram& started) {
  CliResult result;
  if (started.pid < 0) return result;
  int status = 0;
  waitpid(started.pid, &status, 0);
  started.pid = -1;
  close(started.out_fd);
  close(started.err_fd);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = slurp(started.out_path);
  result.err = slurp(started.err_path);
  std::remove(started.out_path.c_str());
  std::remove(started.err_path.c_str());
  return result;
}

CliResult run_program(const std::string& path, const std::vector<std::string>& args,
                      const std::string& cwd, const Environment& env) {
  StartedProgram started = start_program(path, args, cwd, env);
  return finish_program(started);
}

CliResult run_tpusim(const std::vector<std::string>& args, const std::string& cwd,
                     const Environment& env, const RunLimits& limits) {
  StartedProgram started = start_program(tpusim_path(), args, cwd, env, limits);
  CliResult result = finish_program(started);
  // No input a user can give reaches "internal error" (main's net for what slipped past a
  // library's status): every CLI test holds every run to it.
  if (result.err.find("internal error") != std::string::npos)
    ADD_FAILURE() << "tpusim " << (args.empty() ? "" : args[0]) << ": " << result.err;
  return result;
}

}  // namespace tpusim::cli::testing
