#include "tools/studies/point_farm.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>

#include <unistd.h>

#include "common/strings.h"
#include "tools/studies/farm_messages.h"
#include "tools/studies/farm_ranks.h"
#include "tools/studies/mpi_world.h"
#include "tools/studies/subprocess.h"

namespace tpusim::studies {

namespace fs = std::filesystem;

PointFarm::PointFarm(std::unique_ptr<MpiWorld> world) : world_(std::move(world)) {}

absl::StatusOr<std::unique_ptr<PointFarm>> PointFarm::open() {
  // Its points are waited for: an inherited "ignore SIGCHLD" would reap them unseen.
  std::signal(SIGCHLD, SIG_DFL);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string here = str_cat(host, "-", ::getpid());
  if (!started_by_mpi_launcher()) {
    std::unique_ptr<PointFarm> farm(new PointFarm(nullptr));
    farm->nonce_ = here;
    return farm;
  }
  auto world = MpiWorld::join();
  if (!world.ok()) return world.status();
  std::unique_ptr<PointFarm> farm(new PointFarm(*std::move(world)));
  // Rank 0's host and pid name the study on every rank.
  farm->nonce_ = farm->world_->broadcast(here);
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

int PointFarm::serve(const FarmOptions& options) {
  return farm::work(*world_, options, &lost_rank0_);
}

int PointFarm::finish(int exit_code) {
  if (lost_a_rank_ || lost_rank0_) {
    if (coordinator()) {
      std::cerr << "tpusim: a rank was lost, so the MPI job ends with MPI_Abort (the other "
                   "ranks' MPI_Finalize would wait for it)\n";
    }
    exit(exit_code);
  }
  return exit_code;
}

std::string PointFarm::share(std::string text) {
  if (world_ == nullptr) return text;
  text = world_->broadcast(std::move(text));
  if (text.empty()) ran_ = true;  // no rank serves: none needs telling to stop
  return text;
}

absl::Status PointFarm::run(const std::vector<FarmJob>& jobs, const FarmOptions& options,
                            const OnDone& on_done) {
  ran_ = true;
  const bool spread = world_ != nullptr && world_->size() > 1;
  const std::string marker = spread && !options.study_dir.empty()
                                 ? (fs::path(options.study_dir) / (".farm-" + nonce_)).string()
                                 : "";
  return farm::coordinate(world_.get(), jobs, options, on_done, marker, &lost_a_rank_);
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

}  // namespace tpusim::studies
