#include "sim/units/numerics_worker.h"

#include <exception>
#include <utility>

#include <omp.h>

namespace tpusim::sim {

NumericsWorker::NumericsWorker(uint32_t lanes, bool threaded)
    : pending_(lanes),
      posted_(lanes, 0),
      done_(new std::atomic<uint64_t>[lanes]),
      running_(lanes, 0) {
  for (uint32_t l = 0; l < lanes; ++l) done_[l].store(0);
  if (threaded && std::thread::hardware_concurrency() > 1) {
    thread_ = std::thread([this] { run_thread(); });
  }
}

NumericsWorker::~NumericsWorker() {
  if (!thread_.joinable()) return;
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void NumericsWorker::run_job(const std::function<void()>& job) {
  // One host thread per job: Eigen's GEMMs would otherwise start an OpenMP team on a core that
  // the other thread keeps busy (OpenMP's thread count is per thread).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    job();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = e.what();
  }
  omp_set_num_threads(threads);
}

bool NumericsWorker::run_one(std::unique_lock<std::mutex>& lock, uint32_t lane) {
  auto pick = queue_.end();
  if (!running_[lane]) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->lane == lane) {
        pick = it;
        break;
      }
    }
  }
  if (pick == queue_.end()) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (!running_[it->lane]) {
        pick = it;
        break;
      }
    }
  }
  if (pick == queue_.end()) return false;
  Job job = std::move(*pick);
  queue_.erase(pick);
  running_[job.lane] = 1;
  lock.unlock();
  run_job(job.fn);
  lock.lock();
  running_[job.lane] = 0;
  done_[job.lane].fetch_add(1, std::memory_order_release);
  changed_.notify_all();
  return true;
}

void NumericsWorker::run_thread() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (run_one(lock, 0)) continue;
    if (stopping_ && queue_.empty()) return;
    changed_.wait(lock);
  }
}

template <typename Done>
void NumericsWorker::help_until(uint32_t lane, Done done) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!done()) {
    if (!run_one(lock, lane)) changed_.wait(lock);
  }
}

void NumericsWorker::prune(std::deque<Pending>& jobs, const std::atomic<uint64_t>* done) {
  while (!jobs.empty() &&
         jobs.front().seq <= done[jobs.front().lane].load(std::memory_order_acquire))
    jobs.pop_front();
}

template <typename Conflicts>
void NumericsWorker::wait_for_conflicts(const std::deque<Pending>& jobs, Conflicts conflicts) {
  // Jobs of a lane finish in order: waiting for each lane's last conflicting job is enough.
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    if (!conflicts(*it)) continue;
    const uint32_t lane = it->lane;
    const uint64_t seq = it->seq;
    if (done_[lane].load(std::memory_order_acquire) >= seq) continue;
    help_until(lane, [&] { return done_[lane].load(std::memory_order_acquire) >= seq; });
  }
}

void NumericsWorker::post(uint32_t lane, bool shared, HostRange read, HostRange write,
                          std::function<void()> job) {
  if (!threaded()) {
    run_job(job);
    return;
  }
  if (shared) {
    prune(pending_shared_, done_.get());
    wait_for_conflicts(pending_shared_, [&](const Pending& p) {
      return p.lane != lane &&
             (p.write.overlaps(read) || p.write.overlaps(write) || p.read.overlaps(write));
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool full = queue_.size() >= kMaxQueued;
    lock.unlock();
    if (full) help_until(lane, [this] { return queue_.size() < kMaxQueued; });
  }
  ++posted_total_;
  ++unfinished_hint_;
  const Pending record{lane, ++posted_[lane], read, write};
  prune(pending_[lane], done_.get());
  pending_[lane].push_back(record);
  if (shared) pending_shared_.push_back(record);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Job{lane, std::move(job)});
  }
  changed_.notify_all();
}

void NumericsWorker::wait_before_access(std::deque<Pending>& jobs, const HostRange* reads,
                                        size_t count, HostRange write) {
  prune(jobs, done_.get());
  wait_for_conflicts(jobs, [&](const Pending& p) {
    if (p.write.overlaps(write) || p.read.overlaps(write)) return true;
    for (size_t i = 0; i < count; ++i) {
      if (p.write.overlaps(reads[i])) return true;
    }
    return false;
  });
}

void NumericsWorker::before_access(uint32_t lane, const HostRange* reads, size_t count,
                                   HostRange write) {
  wait_before_access(pending_[lane], reads, count, write);
}

void NumericsWorker::before_shared_access(const HostRange* reads, size_t count, HostRange write) {
  if (unfinished_hint_ == 0) return;
  wait_before_access(pending_shared_, reads, count, write);
}

void NumericsWorker::drain() {
  if (unfinished_hint_ == 0) return;
  help_until(0, [this] {
    for (size_t l = 0; l < posted_.size(); ++l) {
      if (done_[l].load(std::memory_order_acquire) < posted_[l]) return false;
    }
    return true;
  });
  for (auto& jobs : pending_) jobs.clear();
  pending_shared_.clear();
  unfinished_hint_ = 0;
}

std::string NumericsWorker::take_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(error_, std::string());
}

}  // namespace tpusim::sim
