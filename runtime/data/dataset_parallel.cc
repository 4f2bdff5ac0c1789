// The threaded transformations of Dataset: map (num_parallel_calls), interleave (parallel or
// not) and prefetch, and the parallel jobs a parallel map or batch runs on. All of them bound
// what they hold and join their threads on destruction.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/strings.h"
#include "runtime/data/dataset.h"
#include "runtime/data/dataset_internal.h"
#include "runtime/data/prefetcher.h"

namespace tpusim::runtime::data {
namespace {

// " (FILE, record N at byte offset M)" for an element read with ReaderOptions::name_records,
// its source components taken off; "" for any other element.
std::string take_record_source(Element* e) {
  const auto file = e->find(kRecordFile);
  const auto place = e->find(kRecordPlace);
  std::string source;
  if (file != e->end() && place != e->end() && file->second.bytes.size() == 1 &&
      place->second.ints.size() == 2) {
    source = str_cat(" (", file->second.bytes[0], ", record ", place->second.ints[0],
                     " at byte offset ", place->second.ints[1], ")");
  }
  if (file != e->end()) e->erase(file);
  if (place != e->end()) e->erase(place);
  return source;
}

// `fn` on `e`, an error naming the element's position and, where known, its record.
absl::StatusOr<Element> map_one(const MapFn& fn, Element e, int64_t index) {
  const std::string source = take_record_source(&e);
  auto out = fn(std::move(e));
  if (out.ok()) return out;
  return absl::Status(out.status().code(),
                      str_cat("map, element ", index, source, ": ", out.status().message()));
}

class SequentialMap final : public Iterator {
 public:
  SequentialMap(std::unique_ptr<Iterator> in, MapFn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
  Next next() override {
    if (done_) return kEnd;
    auto e = in_->next();
    if (is_terminal(e)) {
      done_ = true;
      return e;
    }
    auto out = map_one(fn_, std::move(**e), index_++);
    if (!out.ok()) {
      done_ = true;
      return out.status();
    }
    return std::optional<Element>(std::move(*out));
  }

 private:
  std::unique_ptr<Iterator> in_;
  MapFn fn_;
  int64_t index_ = 0;
  bool done_ = false;
};

// parallel_jobs (dataset_internal.h). Workers reserve a job (a place under max_jobs), draw its
// inputs under the input lock (which numbers jobs and inputs), run the work with no lock held
// and file the outputs by job number. Two condition variables: workers wait for space, the
// consumer for a job, so neither wakes the other needlessly.
class ParallelJobs final : public Iterator {
 public:
  ParallelJobs(std::unique_ptr<Iterator> in, ParallelWork work, int threads, int64_t job_inputs,
               int64_t max_jobs, bool deterministic)
      : in_(std::move(in)),
        work_(std::move(work)),
        job_inputs_(std::max<int64_t>(job_inputs, 1)),
        max_jobs_(std::max<int64_t>(max_jobs, 1)),
        deterministic_(deterministic) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { run_worker(); });
  }
  ~ParallelJobs() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      cancelled_ = true;
    }
    space_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  Next next() override {
    while (!finished_ && handing_out_.empty()) take_job();
    if (finished_) return kEnd;
    Next item = std::move(handing_out_.front());
    handing_out_.pop_front();
    if (is_terminal(item)) finished_ = true;
    return item;
  }

 private:
  // Moves the next finished job's outputs into handing_out_, waiting for one.
  void take_job() {
    std::unique_lock<std::mutex> lock(m_);
    auto ready = results_.end();
    ready_cv_.wait(lock, [&] {
      if (deterministic_) {
        ready = results_.find(jobs_taken_);
      } else {
        ready = results_.begin();
        // The job that met the input's end comes out only once every job before it has.
        if (ready != results_.end() && last_job_ && ready->first == *last_job_ &&
            jobs_taken_ != *last_job_) {
          ready = results_.end();
        }
      }
      return ready != results_.end();
    });
    for (Next& n : ready->second) handing_out_.push_back(std::move(n));
    results_.erase(ready);
    ++jobs_taken_;
    --in_flight_;
    lock.unlock();
    space_cv_.notify_one();
  }

  // The job's work; an exception from it becomes the job's one, terminal, output.
  std::vector<Next> run_work(std::vector<Next> items, int64_t first) {
    std::vector<Next> outputs;
    const Next failed = guarded([&]() -> Next {
      outputs = work_(std::move(items), first);
      return kEnd;
    });
    if (!failed.ok()) return {failed};
    return outputs;
  }

  void run_worker() {
    std::vector<Next> items;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        space_cv_.wait(lock, [&] { return cancelled_ || input_done_ || in_flight_ < max_jobs_; });
        if (cancelled_ || input_done_) return;
        ++in_flight_;  // reserved; given back below if the input has ended meanwhile
      }
      // Draw the job's inputs at once: one lock round and one wake-up per job instead of per
      // element, which matters when the work is cheap.
      items.clear();
      int64_t job = 0, first = 0;
      bool terminal = false;
      {
        std::lock_guard<std::mutex> input_lock(input_m_);
        if (!input_ended_) {
          job = jobs_drawn_++;
          first = taken_;
          while (!input_ended_ && static_cast<int64_t>(items.size()) < job_inputs_) {
            items.push_back(guarded([&] { return in_->next(); }));
            ++taken_;
            terminal = input_ended_ = is_terminal(items.back());
          }
        }
      }
      if (items.empty()) {  // another worker met the end first: no job
        {
          std::lock_guard<std::mutex> lock(m_);
          --in_flight_;
        }
        space_cv_.notify_all();
        return;
      }
      std::vector<Next> outputs = run_work(std::move(items), first);
      {
        std::lock_guard<std::mutex> lock(m_);
        results_.emplace(job, std::move(outputs));
        if (terminal) {
          input_done_ = true;
          last_job_ = job;
        }
      }
      ready_cv_.notify_one();
      if (terminal) {
        space_cv_.notify_all();  // the other workers stop
        return;
      }
    }
  }

  std::unique_ptr<Iterator> in_;
  ParallelWork work_;
  const int64_t job_inputs_;
  const int64_t max_jobs_;
  const bool deterministic_;
  std::mutex input_m_;  // in_, taken_, jobs_drawn_, input_ended_
  int64_t taken_ = 0, jobs_drawn_ = 0;
  bool input_ended_ = false;
  std::mutex m_;  // everything below but the consumer's own
  std::condition_variable space_cv_, ready_cv_;
  std::map<int64_t, std::vector<Next>> results_;  // finished jobs' outputs, by job number
  int64_t in_flight_ = 0, jobs_taken_ = 0;
  std::optional<int64_t> last_job_;
  bool input_done_ = false, cancelled_ = false;
  // The consumer's own: outputs of taken jobs still to hand out, and whether it has ended.
  std::deque<Next> handing_out_;
  bool finished_ = false;
  std::vector<std::thread> workers_;
};

// A parallel map's job: kMapChunk elements, each through fn.
constexpr int64_t kMapChunk = 8;

ParallelWork map_work(MapFn fn) {
  return [fn = std::move(fn)](std::vector<Next> items, int64_t first) {
    for (size_t k = 0; k < items.size(); ++k) {
      Next& item = items[k];
      if (is_terminal(item)) break;  // always the last
      auto out = map_one(fn, std::move(**item), first + static_cast<int64_t>(k));
      item = out.ok() ? Next(std::optional<Element>(std::move(*out))) : Next(out.status());
    }
    return items;
  };
}

class MapDataset final : public Dataset {
 public:
  MapDataset(DatasetPtr in, MapFn fn, int threads, bool deterministic)
      : in_(std::move(in)), fn_(std::move(fn)), threads_(threads), deterministic_(deterministic) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    if (threads_ <= 1) return std::make_unique<SequentialMap>(in_->make_iterator(), fn_);
    return parallel_jobs(in_->make_iterator(), map_work(fn_), threads_, kMapChunk,
                         2 * static_cast<int64_t>(threads_), deterministic_);
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

}  // namespace

int machine_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

std::unique_ptr<Iterator> parallel_jobs(std::unique_ptr<Iterator> in, ParallelWork work,
                                        int threads, int64_t job_inputs, int64_t max_jobs,
                                        bool deterministic) {
  return std::make_unique<ParallelJobs>(std::move(in), std::move(work), threads, job_inputs,
                                        max_jobs, deterministic);
}

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
