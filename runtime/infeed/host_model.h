#pragma once
// A model of the host that runs an input pipeline (docs/architecture.md, "Host timing"): it turns
// what each stage of the pipeline costs per batch, in CPU seconds of one core, into the time each
// batch is ready in the pipeline's prefetch buffer, on the target host's cores.
//
// Each stage runs on `threads` threads; when the pipeline's threads outnumber the cores given to
// it, every thread gets an equal share of a core (effective threads = threads x cores / all
// threads). A stage then takes w = cost / effective threads of wall time per batch.
//
// With a prefetch depth D of at least 1 the stages overlap across batches like a production
// line, and every place a batch can wait is bounded: a stage holds the batch it works on, hands
// it to a one-batch slot in front of the next stage, and the last stage hands it to the prefetch
// buffer of D batches, which the infeed empties. A stage that cannot hand a finished batch on
// waits with it (blocking after service). For batch k of stage i, with L the time a batch
// leaves a stage and T(j) the time the infeed took batch j out of the buffer:
//   start_i(k) = max(L_{i-1}(k), L_i(k-1))
//   L_i(k)     = max(start_i(k) + w_i(k), start_{i+1}(k-1))    (the slot is free again)
//   L_last(k)  = max(start_last(k) + w_last(k), T(k-D))         (a free place in the buffer)
// and batch k is ready when it leaves the last stage. The steady rate is set by the slowest
// stage, and a pipeline faster than the device runs at most D batches (plus one per stage and
// slot) ahead of it instead of banking batches while the device is slow or idle between loops.
// With depth 0 nothing is produced ahead: the infeed asks for batch k once it took batch k-1,
// and the stages run one after another, ready(k) = max(ready(k-1), T(k-1)) + sum_i w_i(k).
//
// Batches are worked out lazily, in order, when their ready time is asked for, so a simulator can
// report T(j) first. A batch whose taking nobody reported counts as taken when it was ready (a
// device that keeps up): that is all add_batch() and the what-if replays assume, the host alone.

#include <cstdint>
#include <string>
#include <vector>

#include "configs/slice_spec.h"

namespace tpusim::runtime {

struct HostStage {
  std::string name;
  uint32_t threads = 1;
};

class HostPipelineModel {
 public:
  // `cpu_cores`: the host cores this pipeline may use (at least 1).
  HostPipelineModel(std::vector<HostStage> stages, uint32_t cpu_cores, uint32_t prefetch_depth);

  // Queues a batch whose stages cost `cpu_seconds` (one per stage, CPU seconds of one core);
  // returns its index. Its times are worked out when ready() first asks.
  uint64_t push(std::vector<double> cpu_seconds);
  // The time batch `k` (pushed) is ready, in seconds from the pipeline's start; works out every
  // batch up to it.
  double ready(uint64_t k);
  // The infeed took batch `k` out of the prefetch buffer at `seconds`. Counts for batches not yet
  // worked out: report it before asking for batch k + prefetch depth.
  void set_taken(uint64_t k, double seconds);
  // Works out every pushed batch.
  void settle();
  // push() and ready() of that batch, the host alone.
  double add_batch(const std::vector<double>& cpu_seconds);

  const std::vector<HostStage>& stages() const { return stages_; }
  uint32_t cpu_cores() const { return cpu_cores_; }
  uint32_t prefetch_depth() const { return prefetch_depth_; }
  double effective_threads(size_t stage) const { return effective_[stage]; }
  uint64_t batches() const { return history_.size(); }  // pushed
  // Wall seconds each stage has been busy so far, and the busiest one: the bottleneck.
  const std::vector<double>& busy_seconds() const { return busy_; }
  size_t busiest_stage() const;
  // The same batches replayed with `stage` on `threads` threads, the host alone: what-if figures.
  HostPipelineModel with_threads(size_t stage, uint32_t threads) const;
  // When the last batch worked out was ready.
  double last_ready_seconds() const { return ready_.empty() ? 0 : ready_.back(); }

  // [start, end) wall seconds of one batch in each stage: what a trace shows per stage.
  using StageSpans = std::vector<std::pair<double, double>>;
  // Starts keeping each new batch's spans until take_spans() hands them over (for traces).
  void record_spans(bool on) { record_spans_ = on; }
  std::vector<StageSpans> take_spans() { return std::move(spans_); }

 private:
  // Works out the next batch (ready_.size()).
  void work_out_next();
  double wall(size_t stage, uint64_t k) const;
  double taken_or_ready(uint64_t k) const;

  std::vector<HostStage> stages_;
  uint32_t cpu_cores_;
  uint32_t prefetch_depth_;
  std::vector<double> effective_;
  // Per stage, with a prefetch depth of at least 1: when it started the last batch worked out,
  // and when that batch left it.
  std::vector<double> start_;
  std::vector<double> left_;
  std::vector<double> busy_;
  std::vector<std::vector<double>> history_;  // pushed costs, CPU seconds
  std::vector<double> ready_;                 // worked out
  std::vector<double> taken_;                 // reported so far; NaN where not
  bool record_spans_ = false;
  std::vector<StageSpans> spans_;
};

// What one example costs the standard pipeline of an input_fn (read -> map -> batch -> enqueue),
// for the deterministic mode.
struct ExampleWork {
  uint64_t record_bytes = 0;      // TFRecord bytes read
  bool parse_example = true;      // a tf.Example parse
  uint64_t raw_bytes = 0;         // bytes through decode_raw
  uint64_t jpeg_pixels = 0;       // pixels decoded from JPEG
  uint64_t resized_pixels = 0;    // output pixels of a resize
  uint64_t augmented_pixels = 0;  // pixels through crop, flip, brightness, contrast
  uint64_t batch_bytes = 0;       // the example's bytes in the batch handed to the infeed
};

// The standard pipeline's stages: read, map, batch (a parallel batch's num_parallel_calls) and
// enqueue (the infeed driver's threads), on so many threads each.
std::vector<HostStage> standard_stages(uint32_t read_threads, uint32_t map_threads,
                                       uint32_t batch_threads = 1, uint32_t enqueue_threads = 1);
// Each standard stage's CPU seconds for a batch of `batch_size` such examples, from the host
// config's stage costs.
std::vector<double> standard_stage_seconds(const config::HostStageCostsSpec& costs,
                                           const ExampleWork& example, uint64_t batch_size);

}  // namespace tpusim::runtime
