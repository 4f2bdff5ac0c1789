#include "runtime/data/prefetcher.h"

#include "runtime/data/dataset_internal.h"

namespace tpusim::runtime::data {

void ReadySignal::notify() {
  {
    std::lock_guard<std::mutex> lock(m);
    ++generation;
  }
  cv.notify_all();
}

Prefetcher::Prefetcher(std::unique_ptr<Iterator> input, size_t capacity,
                       std::shared_ptr<ReadySignal> signal)
    : input_(std::move(input)),
      capacity_(std::max<size_t>(capacity, 1)),
      signal_(std::move(signal)) {
  thread_ = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(m_);
    cancelled_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Prefetcher::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return cancelled_ || queue_.size() < capacity_; });
      if (cancelled_) return;
    }
    // The input is read outside the lock: the consumer can take elements meanwhile.
    Next item = guarded([&] { return input_->next(); });
    const bool terminal = !item.ok() || !item->has_value();
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(m_);
      was_empty = queue_.empty();
      queue_.push_back(std::move(item));
    }
    // The consumer only ever waits on an empty queue: wake it only then, not per element.
    if (was_empty) {
      cv_.notify_all();
      if (signal_) signal_->notify();
    }
    if (terminal) return;
  }
}

absl::StatusOr<std::optional<Element>> Prefetcher::pop_locked() {
  auto item = std::move(queue_.front());
  queue_.pop_front();
  if (!item.ok() || !item->has_value()) consumer_done_ = true;
  return item;
}

absl::StatusOr<std::optional<Element>> Prefetcher::next() {
  std::unique_lock<std::mutex> lock(m_);
  if (consumer_done_) return std::optional<Element>();
  cv_.wait(lock, [&] { return !queue_.empty(); });
  const bool was_full = queue_.size() >= capacity_;
  auto item = pop_locked();
  lock.unlock();
  if (was_full) cv_.notify_all();  // the producer only ever waits on a full queue
  return item;
}

bool Prefetcher::try_next(absl::StatusOr<std::optional<Element>>* out) {
  std::unique_lock<std::mutex> lock(m_);
  if (consumer_done_) {
    *out = std::optional<Element>();
    return true;
  }
  if (queue_.empty()) return false;
  const bool was_full = queue_.size() >= capacity_;
  *out = pop_locked();
  lock.unlock();
  if (was_full) cv_.notify_all();
  return true;
}

}  // namespace tpusim::runtime::data
