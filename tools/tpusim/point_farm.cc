#include "tools/tpusim/point_farm.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>

#include <unistd.h>

#include "common/strings.h"
#include "tools/tpusim/farm_messages.h"
#include "tools/tpusim/farm_ranks.h"
#include "tools/tpusim/mpi_world.h"
#include "tools/tpusim/subprocess.h"

namespace tpusim::cli {

namespace fs = std::filesystem;

PointFarm::PointFarm(std::unique_ptr<MpiWorld> world) : world_(std::move(world)) {}

absl::StatusOr<std::unique_ptr<PointFarm>> PointFarm::open() {
  if (!started_by_mpi_launcher()) return std::unique_ptr<PointFarm>(new PointFarm(nullptr));
  auto world = MpiWorld::join();
  if (!world.ok()) return world.status();
  std::unique_ptr<PointFarm> farm(new PointFarm(*std::move(world)));
  // Rank 0's host and pid name the study's marker on every rank.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  farm->nonce_ = farm->world_->broadcast(str_cat(host, "-", ::getpid()));
  return farm;
}

PointFarm::~PointFarm() {
  if (world_ != nullptr && world_->rank() == 0 && !ran_) {
    for (int r = 1; r < world_->size(); ++r) world_->send(r, farm::kStop, "");
  }
}

void PointFarm::exit(int exit_code) {
  std::cout.flush();
  std::cerr.flush();
  if (world_ != nullptr) world_->abort_all(exit_code);
  std::_Exit(exit_code);
}

bool PointFarm::coordinator() const { return world_ == nullptr || world_->rank() == 0; }

int PointFarm::ranks() const { return world_ == nullptr ? 1 : world_->size(); }

int PointFarm::serve(const FarmOptions& options) { return farm::work(*world_, options); }

namespace {

// Every job in this process, `slots` at a time.
Refused run_here(const std::vector<FarmJob>& jobs, const FarmOptions& options,
                 const PointFarm::OnDone& on_done) {
  struct Running {
    size_t job = 0;
    farm::Clock::time_point started;
  };
  std::map<int, Running> running;
  size_t next = 0;
  while (next < jobs.size() || !running.empty()) {
    while (next < jobs.size() && static_cast<int>(running.size()) < options.slots) {
      auto pid = farm::start_job(jobs[next]);
      if (!pid.ok()) return failure_of(pid.status());
      running[*pid] = {next++, farm::Clock::now()};
    }
    auto ended = wait_any_child();
    if (!ended.ok()) return failure_of(ended.status());
    auto it = running.find(ended->first);
    if (it == running.end()) continue;
    const Running done = it->second;
    running.erase(it);
    on_done(done.job, {ended->second, farm::seconds_since(done.started), 0, ""});
  }
  return std::nullopt;
}

}  // namespace

Refused PointFarm::run(const std::vector<FarmJob>& jobs, const FarmOptions& options,
                       const OnDone& on_done) {
  ran_ = true;
  if (world_ == nullptr || world_->size() == 1) return run_here(jobs, options, on_done);
  const std::string marker =
      options.study_dir.empty() ? "" : (fs::path(options.study_dir) / (".farm-" + nonce_)).string();
  return farm::coordinate(*world_, jobs, options, on_done, marker, &lost_a_rank_);
}

void prepare_job_files(const FarmJob& job) {
  for (const auto& [path, text] : job.inputs) {
    if (farm::read_bytes(path) != text) (void)farm::write_bytes(path, text);
  }
  std::error_code ec;
  for (const std::string& out : {job.log, job.report}) {
    fs::create_directories(fs::path(out).parent_path(), ec);
    fs::remove(out, ec);
  }
  if (!job.run_dir.empty()) {
    fs::remove_all(job.run_dir, ec);
    fs::create_directories(fs::path(job.run_dir).parent_path(), ec);
  }
}

}  // namespace tpusim::cli
