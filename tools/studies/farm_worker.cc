// A rank other than 0 in a farm under MPI: asks rank 0 for a point per free slot, runs each as
// rank 0 would, sends back its report and log, and ends when rank 0 has no more. On a file system
// that is not rank 0's (no marker of the study in its folder), a point's files live here only
// until rank 0 has them.
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <sys/wait.h>

#include "common/strings.h"
#include "tools/studies/farm_messages.h"
#include "tools/studies/farm_ranks.h"
#include "tools/studies/subprocess.h"

namespace tpusim::studies::farm {
namespace {

namespace fs = std::filesystem;

constexpr auto kWorkerIdlePause = std::chrono::milliseconds(1);

// The highest folder above `path` that does not exist yet ("" when its parent does).
fs::path first_missing_folder(const fs::path& path) {
  fs::path missing;
  std::error_code ec;
  for (fs::path p = path.parent_path(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  return missing;
}

// Removes the folders under and at `top` that hold nothing, deepest first.
void remove_empty_folders(const fs::path& top) {
  std::error_code ec;
  if (!fs::is_directory(top, ec)) return;
  for (const auto& entry : fs::directory_iterator(top, ec)) {
    if (entry.is_directory(ec)) remove_empty_folders(entry.path());
  }
  fs::remove(top, ec);  // fails, as it should, when something is left
}

class Worker {
 public:
  Worker(MpiWorld& world, const FarmOptions& options) : world_(world), options_(options) {}

  // Its exit code; `*lost_rank0` when it gave rank 0 up for lost.
  int run(bool* lost_rank0) {
    for (int s = 0; s < options_.slots; ++s) ask();
    last_heard_ = last_beat_ = Clock::now();
    while (!(no_more_ && running_.empty() && asked_ == 0)) {
      bool busy = false;
      while (auto m = world_.poll(options_.rank_timeout_seconds)) {
        busy = true;
        if (m->source != 0) continue;
        if (m->tag == kUnfinished) return stop("a message from rank 0 did not finish");
        last_heard_ = Clock::now();
        if (m->tag == kStop) return stop("rank 0 ended the study");
        if (m->tag == kTask) take_task(m->bytes);
        if (m->tag == kNoMore) {
          --asked_;
          no_more_ = true;
        }
      }
      if (!reap(&busy)) return stop("cannot wait for its points");
      if (seconds_since(last_beat_) >= kBeatSeconds) {
        world_.send(0, kBeat, "");
        last_beat_ = Clock::now();
      }
      if (seconds_since(last_heard_) > options_.rank_timeout_seconds) {
        *lost_rank0 = true;
        return stop(fmt::format("rank 0 was lost: no word from it for {:.1f} s",
                                seconds_since(last_heard_)));
      }
      if (!busy) std::this_thread::sleep_for(kWorkerIdlePause);
    }
    // Every result must reach rank 0 before this rank says it is done and ends.
    world_.flush(options_.rank_timeout_seconds);
    world_.send(0, kBye, "");
    world_.flush(options_.rank_timeout_seconds);
    clean_up();
    return EXIT_SUCCESS;
  }

 private:
  struct Running {
    Task task;
    Clock::time_point started;
    bool shared = false;  // its folder is rank 0's: its files stay
  };

  void ask() {
    world_.send(0, kAsk, "");
    ++asked_;
  }

  void take_task(const std::string& bytes) {
    --asked_;
    auto task = decode_task(bytes);
    if (!task.ok()) {
      // Its point stays with this rank on rank 0's side and fails when this rank ends.
      std::cerr << "tpusim: rank " << world_.rank() << ": " << task.status().message() << "\n";
      if (!no_more_) ask();
      return;
    }
    std::error_code ec;
    Running r{*std::move(task), Clock::now(), false};
    r.shared = !r.task.marker.empty() && fs::exists(r.task.marker, ec);
    if (!r.shared) note_folders(r.task.job);
    auto pid = start_job(r.task.job);
    if (!pid.ok()) {
      (void)write_bytes(r.task.job.log,
                        str_cat("cannot start its process: ", pid.status().message(), "\n"));
      send_result(r, 127);
      return;
    }
    running_[*pid] = std::move(r);
  }

  // The folders this rank makes for a job, to remove once they are empty again.
  void note_folders(const FarmJob& job) {
    std::vector<std::string> paths = {job.log, job.report};
    if (!job.run_dir.empty()) paths.push_back(job.run_dir + "/.");
    for (const auto& input : job.inputs) paths.push_back(input.first);
    for (const std::string& p : paths) {
      const fs::path top = first_missing_folder(p);
      if (!top.empty()) made_.insert(top);
    }
  }

  bool reap(bool* busy) {
    while (!running_.empty()) {
      auto ended = poll_any_child();
      if (!ended.ok()) return false;
      if (!ended->has_value()) return true;
      auto it = running_.find((*ended)->first);
      if (it == running_.end()) continue;
      send_result(it->second, (*ended)->second);
      running_.erase(it);
      *busy = true;
    }
    return true;
  }

  void send_result(const Running& r, int exit_code) {
    const FarmJob& job = r.task.job;
    Result result;
    result.index = r.task.index;
    result.exit_code = exit_code;
    result.seconds = seconds_since(r.started);
    result.log = read_bytes(job.log).value_or("");
    if (auto report = read_bytes(job.report)) {
      result.has_report = true;
      result.report = *std::move(report);
    }
    world_.send(0, kResult, encode_result(result));
    if (!r.shared) {
      // Rank 0 has them once the send completes; the bytes sent are a copy.
      std::error_code ec;
      for (const std::string& f : {job.log, job.report}) fs::remove(f, ec);
      if (!job.run_dir.empty()) fs::remove_all(job.run_dir, ec);
      // Inputs go at the end: another point here may share one (the base config).
      for (const auto& input : job.inputs) inputs_.insert(input.first);
    }
    if (!no_more_) ask();
  }

  void clean_up() {
    std::error_code ec;
    for (const std::string& input : inputs_) fs::remove(input, ec);
    for (const fs::path& folder : made_) remove_empty_folders(folder);
  }

  int stop(const std::string& why) {
    for (const auto& [pid, r] : running_) ::kill(pid, SIGKILL);
    for (const auto& [pid, r] : running_) ::waitpid(pid, nullptr, 0);
    running_.clear();
    clean_up();
    std::cerr << "tpusim: rank " << world_.rank() << " stops: " << why << "\n";
    return EXIT_FAILURE;
  }

  MpiWorld& world_;
  const FarmOptions& options_;
  std::map<int, Running> running_;
  std::set<fs::path> made_;
  std::set<std::string> inputs_;  // written here for rank 0's points
  int asked_ = 0;
  bool no_more_ = false;
  Clock::time_point last_heard_, last_beat_;
};

}  // namespace

int work(MpiWorld& world, const FarmOptions& options, bool* lost_rank0) {
  return Worker(world, options).run(lost_rank0);
}

}  // namespace tpusim::studies::farm
