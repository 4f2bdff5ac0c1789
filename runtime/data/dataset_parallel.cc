// The threaded transformations of Dataset: map (num_parallel_calls), interleave (parallel or
// not) and prefetch. All of them bound what they hold and join their threads on destruction.
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/strings.h"
#include "runtime/data/dataset.h"
#include "runtime/data/dataset_internal.h"
#include "runtime/data/prefetcher.h"

namespace tpusim::runtime::data {
namespace {

using Next = absl::StatusOr<std::optional<Element>>;
const Next kEnd = std::optional<Element>();

absl::Status with_context(const absl::Status& s, int64_t index) {
  return absl::Status(s.code(), str_cat("map, element ", index, ": ", s.message()));
}

class SequentialMap final : public Iterator {
 public:
  SequentialMap(std::unique_ptr<Iterator> in, MapFn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
  Next next() override {
    if (done_) return kEnd;
    auto e = in_->next();
    if (!e.ok() || !e->has_value()) {
      done_ = true;
      return e;
    }
    auto out = fn_(std::move(**e));
    const int64_t index = index_++;
    if (!out.ok()) {
      done_ = true;
      return with_context(out.status(), index);
    }
    return std::optional<Element>(std::move(*out));
  }

 private:
  std::unique_ptr<Iterator> in_;
  MapFn fn_;
  int64_t index_ = 0;
  bool done_ = false;
};

// Workers take input elements in order (chunks of kChunk under the input lock, which numbers
// them), apply fn with no lock held and file results by number. The consumer takes number
// `next_out_` when deterministic, else the lowest-numbered finished result. At most `capacity_`
// elements are taken and not yet consumed (backpressure). Two condition variables: workers wait
// for space, the consumer for a result, so neither wakes the other needlessly.
class ParallelMap final : public Iterator {
 public:
  ParallelMap(std::unique_ptr<Iterator> in, MapFn fn, int threads, bool deterministic)
      : in_(std::move(in)),
        fn_(std::move(fn)),
        deterministic_(deterministic),
        capacity_(2 * kChunk * static_cast<int64_t>(threads)) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
  }
  ~ParallelMap() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      cancelled_ = true;
    }
    space_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  Next next() override {
    std::unique_lock<std::mutex> lock(m_);
    if (finished_) return kEnd;
    auto ready = results_.end();
    ready_cv_.wait(lock, [&] {
      if (deterministic_) {
        ready = results_.find(next_out_);
      } else {
        ready = results_.begin();
        // The end marker comes out only once every element before it has.
        if (ready != results_.end() && terminal_at_ && ready->first == *terminal_at_ &&
            consumed_ != *terminal_at_) {
          ready = results_.end();
        }
      }
      return ready != results_.end();
    });
    Next item = std::move(ready->second);
    results_.erase(ready);
    ++consumed_;
    --in_flight_;
    if (deterministic_) ++next_out_;
    if (!item.ok() || !item->has_value()) finished_ = true;
    lock.unlock();
    space_cv_.notify_one();
    return item;
  }

 private:
  void work() {
    std::vector<Next> items;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        space_cv_.wait(
            lock, [&] { return cancelled_ || input_done_ || in_flight_ + kChunk <= capacity_; });
        if (cancelled_ || input_done_) return;
        in_flight_ += kChunk;  // reserved; what goes unused is given back below
      }
      // Take up to kChunk consecutive elements at once: one lock round and one wake-up per chunk
      // instead of per element, which matters when fn is cheap.
      items.clear();
      int64_t first = 0;
      bool terminal = false;
      {
        std::lock_guard<std::mutex> input_lock(input_m_);
        first = taken_;
        while (!input_ended_ && static_cast<int64_t>(items.size()) < kChunk) {
          items.push_back(in_->next());
          ++taken_;
          terminal = input_ended_ = !items.back().ok() || !items.back()->has_value();
        }
      }
      for (size_t k = 0; k < items.size(); ++k) {
        Next& item = items[k];
        if (!item.ok() || !item->has_value()) break;  // the terminal item, always last
        auto out = fn_(std::move(**item));
        item = out.ok() ? Next(std::optional<Element>(std::move(*out)))
                        : Next(with_context(out.status(), first + static_cast<int64_t>(k)));
      }
      {
        std::lock_guard<std::mutex> lock(m_);
        in_flight_ -= kChunk - static_cast<int64_t>(items.size());
        for (size_t k = 0; k < items.size(); ++k)
          results_.emplace(first + static_cast<int64_t>(k), std::move(items[k]));
        if (terminal) {
          input_done_ = true;
          terminal_at_ = first + static_cast<int64_t>(items.size()) - 1;
        }
      }
      ready_cv_.notify_one();
      if (terminal || items.empty()) {
        space_cv_.notify_all();  // the other workers stop
        return;
      }
    }
  }

  static constexpr int64_t kChunk = 8;
  std::unique_ptr<Iterator> in_;
  MapFn fn_;
  const bool deterministic_;
  const int64_t capacity_;
  std::mutex input_m_;  // in_, taken_, input_ended_
  int64_t taken_ = 0;
  bool input_ended_ = false;
  std::mutex m_;  // everything below
  std::condition_variable space_cv_, ready_cv_;
  std::map<int64_t, Next> results_;
  int64_t in_flight_ = 0, consumed_ = 0, next_out_ = 0;
  std::optional<int64_t> terminal_at_;
  bool input_done_ = false, cancelled_ = false, finished_ = false;
  std::vector<std::thread> workers_;
};

class MapDataset final : public Dataset {
 public:
  MapDataset(DatasetPtr in, MapFn fn, int threads, bool deterministic)
      : in_(std::move(in)), fn_(std::move(fn)), threads_(threads), deterministic_(deterministic) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    if (threads_ <= 1) return std::make_unique<SequentialMap>(in_->make_iterator(), fn_);
    return std::make_unique<ParallelMap>(in_->make_iterator(), fn_, threads_, deterministic_);
  }

 private:
  DatasetPtr in_;
  MapFn fn_;
  int threads_;
  bool deterministic_;
};

// Round robin over up to cycle_length open inputs, block_length elements from each; an input
// that ends is replaced by the next one in its slot. Parallel: each open input is a Prefetcher.
class Interleave final : public Iterator {
 public:
  Interleave(std::unique_ptr<Iterator> in, ElementSource source, InterleaveOptions o)
      : in_(std::move(in)),
        source_(std::move(source)),
        o_(o),
        slots_(static_cast<size_t>(std::max(o.cycle_length, 1))) {
    if (o_.parallel) signal_ = std::make_shared<ReadySignal>();
  }

  Next next() override {
    if (finished_) return kEnd;
    for (;;) {
      // Open inputs in empty slots, in order.
      for (auto& slot : slots_) {
        if (slot == nullptr && !input_done_) {
          auto e = in_->next();
          if (!e.ok()) return fail(e.status());
          if (!e->has_value()) {
            input_done_ = true;
          } else {
            auto it = source_(**e);
            slot = o_.parallel
                       ? std::make_unique<Prefetcher>(
                             std::move(it), static_cast<size_t>(std::max(o_.buffer, 1)), signal_)
                       : std::move(it);
          }
        }
      }
      if (std::all_of(slots_.begin(), slots_.end(), [](const auto& s) { return s == nullptr; })) {
        finished_ = true;
        return kEnd;
      }
      if (o_.parallel && !o_.deterministic) {
        auto got = take_any_ready();
        if (got) return *got;
        continue;
      }
      auto& slot = slots_[cur_];
      if (slot == nullptr) {
        advance();
        continue;
      }
      auto e = slot->next();
      if (!e.ok()) return fail(e.status());
      if (!e->has_value()) {
        slot.reset();
        advance();
        continue;
      }
      if (++in_block_ >= o_.block_length) advance();
      return e;
    }
  }

 private:
  void advance() {
    cur_ = (cur_ + 1) % slots_.size();
    in_block_ = 0;
  }
  Next fail(absl::Status s) {
    finished_ = true;
    slots_.clear();  // joins the prefetchers
    return s;
  }
  // Non-deterministic: the first slot (from the current one) with something ready; waits for
  // any slot when none is. nullopt: a slot ended, go round again.
  std::optional<Next> take_any_ready() {
    for (;;) {
      uint64_t seen;
      {
        std::lock_guard<std::mutex> lock(signal_->m);
        seen = signal_->generation;
      }
      for (size_t k = 0; k < slots_.size(); ++k) {
        const size_t i = (cur_ + k) % slots_.size();
        auto* p = static_cast<Prefetcher*>(slots_[i].get());
        if (p == nullptr) continue;
        Next e;
        if (!p->try_next(&e)) continue;
        cur_ = (i + 1) % slots_.size();
        if (!e.ok()) return fail(e.status());
        if (!e->has_value()) {
          slots_[i].reset();
          return std::nullopt;
        }
        return e;
      }
      std::unique_lock<std::mutex> lock(signal_->m);
      signal_->cv.wait(lock, [&] { return signal_->generation != seen; });
    }
  }

  std::unique_ptr<Iterator> in_;
  ElementSource source_;
  InterleaveOptions o_;
  std::vector<std::unique_ptr<Iterator>> slots_;
  std::shared_ptr<ReadySignal> signal_;
  size_t cur_ = 0;
  int in_block_ = 0;
  bool input_done_ = false, finished_ = false;
};

class InterleaveDataset final : public Dataset {
 public:
  InterleaveDataset(DatasetPtr in, ElementSource source, InterleaveOptions o)
      : in_(std::move(in)), source_(std::move(source)), o_(o) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    return std::make_unique<Interleave>(in_->make_iterator(), source_, o_);
  }

 private:
  DatasetPtr in_;
  ElementSource source_;
  InterleaveOptions o_;
};

class PrefetchDataset final : public Dataset {
 public:
  PrefetchDataset(DatasetPtr in, int buffer) : in_(std::move(in)), buffer_(buffer) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    return std::make_unique<Prefetcher>(in_->make_iterator(), static_cast<size_t>(buffer_));
  }

 private:
  DatasetPtr in_;
  int buffer_;
};

int machine_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace

DatasetPtr Dataset::map(MapFn fn, int num_parallel_calls, bool deterministic) const {
  const int threads = num_parallel_calls == kAutotune ? machine_threads() : num_parallel_calls;
  return std::make_shared<MapDataset>(self(), std::move(fn), threads, deterministic);
}

DatasetPtr Dataset::interleave(ElementSource source, InterleaveOptions options) const {
  if (options.cycle_length < 1 || options.block_length < 1) {
    return std::make_shared<FailingDataset>(absl::InvalidArgumentError(
        str_cat("interleave: cycle_length ", options.cycle_length, " and block_length ",
                options.block_length, " must be at least 1")));
  }
  return std::make_shared<InterleaveDataset>(self(), std::move(source), options);
}

DatasetPtr Dataset::prefetch(int buffer_size) const {
  return std::make_shared<PrefetchDataset>(self(),
                                           buffer_size == kAutotune ? 2 : std::max(buffer_size, 1));
}

}  // namespace tpusim::runtime::data
