// tpusim: git-style subcommands over the tpusim libraries. main() only dispatches; each
// subcommand lives in its own cmd_*.cc.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "common/process_allocator.h"
#include "sim/numerics/eigen_cache.h"
#include "tools/studies/subprocess.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/thread_environment.h"

namespace {

std::string top_usage() {
  std::string out =
      "usage: tpusim <command> [options]\n"
      "       tpusim <command> --help\n\n"
      "A cycle-level TPU simulator and TPUEstimator-style runtime.\n\ncommands:\n";
  size_t width = 0;
  for (const auto& cmd : tpusim::cli::commands()) width = std::max(width, cmd.name.size());
  for (const auto& cmd : tpusim::cli::commands()) {
    out += "  " + cmd.name + std::string(width + 2 - cmd.name.size(), ' ') + cmd.summary + "\n";
  }
  return out;
}

// "cannot create directories /proc/x: Read-only file system" from libstdc++'s "filesystem error:
// cannot create directories: Read-only file system [/proc/x]": the operation, the path and the
// system's reason, in that order ("cannot status" reads as "cannot read the status of").
std::string filesystem_failure(const std::filesystem::filesystem_error& e) {
  std::string op = e.what();
  const std::string prefix = "filesystem error: ", reason = e.code().message();
  if (op.rfind(prefix, 0) == 0) op = op.substr(prefix.size());
  if (const size_t end = op.find(": " + reason); end != std::string::npos) op = op.substr(0, end);
  if (op == "status" || op == "symlink_status") op = "cannot read the status of";
  if (op.rfind("cannot ", 0) != 0) op = "cannot " + op;
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " to " + e.path2().string();
  return op + " " + paths + ": " + reason;
}

// A command's exit status, or kFailed when what it printed did not reach standard output (a full
// disk, /dev/full, a closed pipe): its answer was lost, and a script must not read success.
int with_output_written(const std::string& name, int rc) {
  if (std::cout.flush()) return rc;
  std::cerr << "tpusim " << name << ": cannot write standard output (" << std::strerror(errno)
            << "); what the command printed is lost\n";
  return rc == tpusim::cli::kOk ? tpusim::cli::kFailed : rc;
}

}  // namespace

int main(int argc, char** argv) {
  using tpusim::cli::kOk;
  using tpusim::cli::kUsage;
  tpusim::studies::die_with_parent_if_asked();  // a study's point ends with the study
  tpusim::keep_freed_memory_for_reuse();  // steady-state costs for the measured input pipeline
  // Another host's caches, to show that no figure follows this one's (docs/reliability.md).
  if (auto pretend = tpusim::sim::apply_eigen_cache_sizes_from_environment(); !pretend.ok()) {
    std::cerr << "tpusim: " << pretend.message() << "\n";
    return kUsage;
  }
  if (auto threads = tpusim::cli::check_omp_num_threads(std::getenv("OMP_NUM_THREADS"));
      !threads.ok()) {
    std::cerr << "tpusim: " << threads.message() << "\n";
    return kUsage;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << top_usage();
    return kUsage;
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << top_usage();
    return kOk;
  }
  if (name == "--version") {
    std::cout << "tpusim " << TPUSIM_VERSION << "\n";
    return kOk;
  }
  for (const auto& cmd : tpusim::cli::commands()) {
    if (cmd.name == name) {
      try {
        return with_output_written(name,
                                   cmd.run(std::vector<std::string>(args.begin() + 1, args.end())));
      } catch (const std::filesystem::filesystem_error& e) {
        // A filesystem call that threw where a status was due: named as what it is (the
        // operation, the path, the system's reason), since it is the user's folder, not a bug.
        std::cerr << "tpusim " << name << ": " << filesystem_failure(e) << "\n";
        return tpusim::cli::kFailed;
      } catch (const std::bad_alloc&) {
        std::cerr << "tpusim " << name << ": out of host memory\n";
        return tpusim::cli::kFailed;
      } catch (const std::exception& e) {
        // Libraries report through status values; this catches what slipped through (a bug) so
        // the user sees a message instead of an abort.
        std::cerr << "tpusim " << name << ": internal error: " << e.what() << "\n";
        return tpusim::cli::kFailed;
      }
    }
  }
  return tpusim::cli::usage_error("unknown command '" + name + "'", top_usage());
}
