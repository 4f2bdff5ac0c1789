#pragma once
// CPU time of each stage of a host input pipeline, measured while it really runs: the input of
// the host timing model's measured mode (runtime/infeed/host_model.h). A stage is a name, the
// number of threads that run it, and the CPU time (the thread CPU clock, so time a thread spends
// blocked on a queue is not counted) and elements it has accrued.
//
//   auto profile = std::make_shared<StageProfile>();
//   auto ds = Dataset::tfrecords(files)->profiled(profile, "read")
//                 ->map(profile->timed("decode", decode_fn, 4), 4)
//                 ->batch(128, true)->profiled(profile, "batch");
//
// Timed regions nest per thread: a stage is charged its self time, so "batch" above (which pulls
// "read" through a sequential chain) does not count the reading, and a region on a map worker
// thread counts only there. Thread-safe; stages are kept in the order they were declared.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace tpusim::runtime::data {

struct StageSample {
  std::string name;
  int threads = 1;
  double cpu_seconds = 0;
  uint64_t elements = 0;
};

class StageProfile : public std::enable_shared_from_this<StageProfile> {
 public:
  // The stage's index; declaring a name again returns the same stage (threads from the first).
  size_t declare(const std::string& name, int threads = 1);
  // `fn` with its CPU time charged to `stage`, one element per call. The profile must be owned
  // by a shared_ptr (the function keeps it alive).
  MapFn timed(const std::string& stage, MapFn fn, int threads = 1);
  void add(size_t stage, uint64_t cpu_ns, uint64_t elements);
  std::vector<StageSample> snapshot() const;

 private:
  struct Stage {
    std::string name;
    int threads = 1;
    std::atomic<uint64_t> cpu_ns{0};
    std::atomic<uint64_t> elements{0};
  };
  mutable std::mutex m_;  // guards the deque's shape; the counters are atomic
  std::deque<Stage> stages_;
};

// The calling thread's CPU time in nanoseconds.
uint64_t thread_cpu_ns();

// Charges the self time of its scope (its time less that of regions nested in it on the same
// thread) to one stage of a profile.
class StageRegion {
 public:
  StageRegion(StageProfile& profile, size_t stage);
  ~StageRegion();
  StageRegion(const StageRegion&) = delete;
  StageRegion& operator=(const StageRegion&) = delete;
  void count_element() { elements_ = 1; }

 private:
  StageProfile& profile_;
  size_t stage_;
  StageRegion* parent_;
  uint64_t start_ns_;
  uint64_t children_ns_ = 0;
  uint64_t elements_ = 0;
};

}  // namespace tpusim::runtime::data
