// Rank 0 of a farm, or the one process of a farm without MPI: one loop that starts its own points,
// reaps them, answers the other ranks' asks and results, says it is still here, and notices a rank
// that has gone silent. Without MPI it waits for its points without polling.
#include <csignal>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
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

// A pause when a pass of the loop found nothing to do: short beside any point's run, and the
// whole of rank 0's wait for a point that ends.
constexpr auto kCoordinatorIdlePause = std::chrono::microseconds(500);

class Coordinator {
 public:
  Coordinator(MpiWorld* world, const std::vector<FarmJob>& jobs, const FarmOptions& options,
              const PointFarm::OnDone& on_done, std::string marker)
      : world_(world),
        jobs_(jobs),
        options_(options),
        on_done_(on_done),
        marker_(std::move(marker)),
        ranks_(world != nullptr ? static_cast<size_t>(world->size()) : 1) {
    for (size_t j = 0; j < jobs.size(); ++j) pending_.push_back(j);
    for (Rank& r : ranks_) r.last_heard = Clock::now();
    last_beat_ = Clock::now();
  }

  absl::Status run() {
    absl::Status r = loop();
    if (!r.ok()) stop_everything();
    if (world_ != nullptr) world_->flush(options_.rank_timeout_seconds);
    return r;
  }

  bool lost_a_rank() const {
    for (size_t r = 1; r < ranks_.size(); ++r) {
      if (!ranks_[r].alive) return true;
    }
    return false;
  }

 private:
  struct Running {
    size_t job = 0;
    Clock::time_point started;
  };
  struct Rank {
    Clock::time_point last_heard;
    bool alive = true, bye = false;
    std::map<size_t, Clock::time_point> jobs;  // what it runs, since when
  };

  absl::Status loop() {
    while (!finished()) {
      bool busy = start_local();
      if (world_ == nullptr) {
        if (absl::Status r = reap_local(/*block=*/!local_.empty(), &busy); !r.ok()) return r;
        continue;
      }
      if (absl::Status r = reap_local(/*block=*/false, &busy); !r.ok()) return r;
      while (auto m = world_->poll(options_.rank_timeout_seconds)) {
        handle(*m);
        busy = true;
      }
      beat();
      find_lost();
      if (!busy) std::this_thread::sleep_for(kCoordinatorIdlePause);
    }
    return absl::OkStatus();
  }

  bool finished() const {
    if (!pending_.empty() || !local_.empty()) return false;
    for (size_t r = 1; r < ranks_.size(); ++r) {
      if (ranks_[r].alive && !ranks_[r].bye) return false;
    }
    return true;
  }

  // Starts points here while a slot is free; a point that cannot start fails (exit 127) with
  // the reason in its log.
  bool start_local() {
    bool started = false;
    while (!pending_.empty() && static_cast<int>(local_.size()) < options_.slots) {
      const size_t j = pending_.front();
      pending_.pop_front();
      started = true;
      auto pid = start_job(jobs_[j]);
      if (!pid.ok()) {
        const std::string why = str_cat("cannot start its process: ", pid.status().message());
        (void)write_bytes(jobs_[j].log, why + "\n");
        on_done_(j, {127, 0, 0, why});
        continue;
      }
      local_[*pid] = {j, Clock::now()};
    }
    return started;
  }

  absl::Status reap_local(bool block, bool* busy) {
    while (!local_.empty()) {
      std::optional<std::pair<int, int>> ended;
      if (block) {
        auto waited = wait_any_child();
        if (!waited.ok()) return waited.status();
        ended = *waited;
      } else {
        auto polled = poll_any_child();
        if (!polled.ok()) return polled.status();
        ended = *polled;
      }
      if (!ended.has_value()) return absl::OkStatus();
      auto it = local_.find(ended->first);
      if (it == local_.end()) continue;
      const Running done = it->second;
      local_.erase(it);
      on_done_(done.job, {ended->second, seconds_since(done.started), 0, ""});
      *busy = true;
      if (block) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  void handle(const MpiMessage& m) {
    if (m.source <= 0 || static_cast<size_t>(m.source) >= ranks_.size()) return;
    Rank& rank = ranks_[static_cast<size_t>(m.source)];
    if (!rank.alive) {
      // Given up for lost, its points already failed: it is told to end.
      world_->send(m.source, kStop, "");
      return;
    }
    rank.last_heard = Clock::now();
    if (m.tag == kUnfinished) {
      lose(static_cast<size_t>(m.source),
           fmt::format("rank {} was lost: a message from it did not finish in {:g} s", m.source,
                       options_.rank_timeout_seconds));
    } else if (m.tag == kAsk) {
      hand_out(m.source, rank);
    } else if (m.tag == kResult) {
      take_result(m.source, rank, m.bytes);
    } else if (m.tag == kBye) {
      rank.bye = true;
      fail_points(static_cast<size_t>(m.source),
                  fmt::format("rank {} ended without reporting it", m.source));
    }
  }

  void hand_out(int to, Rank& rank) {
    if (pending_.empty()) {
      world_->send(to, kNoMore, "");
      return;
    }
    const size_t j = pending_.front();
    pending_.pop_front();
    // What an earlier run left of this point goes first: a rank lost while running it leaves
    // no stale report behind.
    prepare_job_files(jobs_[j]);
    rank.jobs[j] = Clock::now();
    world_->send(to, kTask, encode_task(j, jobs_[j], marker_));
  }

  void take_result(int from, Rank& rank, const std::string& bytes) {
    auto result = decode_result(bytes);
    if (!result.ok() || rank.jobs.count(result->index) == 0) {
      // Its point stays with the rank: it fails when the rank ends or is lost.
      std::cerr << "tpusim: rank " << from << " sent a result that names no point it runs"
                << (result.ok() ? "" : str_cat(" (", result.status().message(), ")")) << "\n";
      return;
    }
    rank.jobs.erase(result->index);
    const FarmJob& job = jobs_[result->index];
    std::string problems;
    if (absl::Status s = write_bytes(job.log, result->log); !s.ok())
      problems = std::string(s.message());
    if (result->has_report) {
      if (absl::Status s = write_bytes(job.report, result->report); !s.ok())
        problems = std::string(s.message());
    }
    if (!problems.empty()) std::cerr << "tpusim: point " << job.id << ": " << problems << "\n";
    on_done_(result->index, {result->exit_code, result->seconds, from, ""});
  }

  void beat() {
    if (seconds_since(last_beat_) < kBeatSeconds) return;
    last_beat_ = Clock::now();
    for (size_t r = 1; r < ranks_.size(); ++r) {
      if (ranks_[r].alive && !ranks_[r].bye) world_->send(static_cast<int>(r), kBeat, "");
    }
  }

  // A rank silent past the timeout is lost.
  void find_lost() {
    for (size_t r = 1; r < ranks_.size(); ++r) {
      const Rank& rank = ranks_[r];
      if (!rank.alive || rank.bye) continue;
      const double silent = seconds_since(rank.last_heard);
      if (silent <= options_.rank_timeout_seconds) continue;
      lose(r, fmt::format("rank {} was lost: no word from it for {:.1f} s (the limit is {:g} s)", r,
                          silent, options_.rank_timeout_seconds));
    }
  }

  void lose(size_t r, const std::string& why) {
    ranks_[r].alive = false;
    std::cerr << "tpusim: " << why << "; " << ranks_[r].jobs.size() << " of its point(s) failed\n";
    fail_points(r, why);
  }

  // The points rank `r` still runs fail, their logs saying why.
  void fail_points(size_t r, const std::string& why) {
    for (const auto& [j, started] : ranks_[r].jobs) {
      (void)write_bytes(jobs_[j].log, why + "\n");
      on_done_(j, {-1, seconds_since(started), static_cast<int>(r), why});
    }
    ranks_[r].jobs.clear();
  }

  // The study stops here: the other ranks are told to end, this rank's points are ended.
  void stop_everything() {
    for (size_t r = 1; r < ranks_.size(); ++r) {
      if (ranks_[r].alive && !ranks_[r].bye) world_->send(static_cast<int>(r), kStop, "");
    }
    for (const auto& [pid, running] : local_) ::kill(pid, SIGKILL);
    for (const auto& [pid, running] : local_) ::waitpid(pid, nullptr, 0);
    local_.clear();
  }

  MpiWorld* world_;
  const std::vector<FarmJob>& jobs_;
  const FarmOptions& options_;
  const PointFarm::OnDone& on_done_;
  const std::string marker_;
  std::vector<Rank> ranks_;
  std::deque<size_t> pending_;
  std::map<int, Running> local_;
  Clock::time_point last_beat_;
};

}  // namespace

absl::Status coordinate(MpiWorld* world, const std::vector<FarmJob>& jobs,
                        const FarmOptions& options, const PointFarm::OnDone& on_done,
                        const std::string& marker, bool* lost) {
  std::error_code ec;
  if (!marker.empty()) {
    if (absl::Status s = write_bytes(marker, "a tpusim study's folder, shared by its ranks\n");
        !s.ok()) {
      // An empty farm tells the other ranks to end; the folder's error is the one to report.
      (void)Coordinator(world, {}, options, on_done, "").run();
      return absl::Status(s.code(), str_cat("the study's folder: ", s.message()));
    }
  }
  Coordinator c(world, jobs, options, on_done, marker);
  absl::Status r = c.run();
  *lost = c.lost_a_rank();
  if (!marker.empty()) fs::remove(marker, ec);
  return r;
}

}  // namespace tpusim::studies::farm
