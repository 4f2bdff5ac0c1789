#pragma once
// A thread that reads ahead from an iterator into a bounded queue: the building block of
// prefetch and of the parallel interleave. The producer blocks while the queue is full
// (backpressure); it stops after the input's end or first error, which it queues like an
// element. The destructor cancels the thread and joins it, also when the consumer stops early.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/data/dataset.h"

namespace tpusim::runtime::data {

// Wakes a consumer waiting on several prefetchers (a non-deterministic interleave).
struct ReadySignal {
  std::mutex m;
  std::condition_variable cv;
  uint64_t generation = 0;
  void notify();
};

class Prefetcher final : public Iterator {
 public:
  Prefetcher(std::unique_ptr<Iterator> input, size_t capacity,
             std::shared_ptr<ReadySignal> signal = nullptr);
  ~Prefetcher() override;
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Blocks until an element, the end or an error is ready.
  absl::StatusOr<std::optional<Element>> next() override;
  // Does not block: false when nothing is ready yet.
  bool try_next(absl::StatusOr<std::optional<Element>>* out);

 private:
  void run();
  absl::StatusOr<std::optional<Element>> pop_locked();

  std::unique_ptr<Iterator> input_;
  const size_t capacity_;
  std::shared_ptr<ReadySignal> signal_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<absl::StatusOr<std::optional<Element>>> queue_;
  bool consumer_done_ = false;  // the consumer has taken the terminal item
  bool cancelled_ = false;
  std::thread thread_;
};

}  // namespace tpusim::runtime::data
