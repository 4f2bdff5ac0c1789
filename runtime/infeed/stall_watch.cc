#include "runtime/infeed/stall_watch.h"

#include <algorithm>

namespace tpusim::runtime {

StallWatch::StallWatch(std::chrono::milliseconds first_report, Report report)
    : first_report_(std::max(first_report, std::chrono::milliseconds(1))),
      report_(std::move(report)) {
  thread_ = std::thread([this] { run(); });
}

std::unique_ptr<StallWatch> StallWatch::after_seconds(double seconds, Report report) {
  if (!(seconds > 0) || !report) return nullptr;
  const auto first = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(std::min(seconds, 1e9)));
  return std::make_unique<StallWatch>(first, std::move(report));
}

StallWatch::~StallWatch() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

StallWatch::Scope::~Scope() {
  if (watch_ != nullptr) watch_->end_wait(id_);
}

StallWatch::Scope& StallWatch::Scope::operator=(Scope&& other) noexcept {
  if (this != &other) {
    if (watch_ != nullptr) watch_->end_wait(id_);
    watch_ = other.watch_;
    id_ = other.id_;
    other.watch_ = nullptr;
  }
  return *this;
}

StallWatch::Scope StallWatch::watch(Describe describe) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(m_);
    waiting_ = true;
    ++wait_id_;
    since_ = Clock::now();
    next_report_ = since_ + first_report_;
    describe_ = std::move(describe);
    reported_ = false;
    id = wait_id_;
  }
  cv_.notify_all();
  return Scope(this, id);
}

namespace {
double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

void StallWatch::end_wait(uint64_t id) {
  Describe describe;
  double seconds = 0;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!waiting_ || wait_id_ != id) return;
    waiting_ = false;
    if (!reported_) return;  // the common case: nothing was said, nothing to close
    seconds = seconds_between(since_, Clock::now());
    describe = std::move(describe_);
  }
  std::lock_guard<std::mutex> reporting(report_m_);
  report_(describe(seconds, /*ended=*/true));
}

void StallWatch::run() {
  std::unique_lock<std::mutex> lock(m_);
  while (!stopping_) {
    if (!waiting_) {
      cv_.wait(lock);
      continue;
    }
    const uint64_t id = wait_id_;
    cv_.wait_until(lock, next_report_);
    // Woken early (a new wait, an ended one, stopping, spuriously): look again.
    if (stopping_ || !waiting_ || wait_id_ != id || Clock::now() < next_report_) continue;
    const auto now = Clock::now();
    const double seconds = seconds_between(since_, now);
    next_report_ = since_ + 2 * (now - since_);
    reported_ = true;
    Describe describe = describe_;
    lock.unlock();
    {
      std::lock_guard<std::mutex> reporting(report_m_);
      report_(describe(seconds, /*ended=*/false));
    }
    lock.lock();
  }
}

}  // namespace tpusim::runtime
