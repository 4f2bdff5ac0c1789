#pragma once
// A model of the host that runs an input pipeline (ARCHITECTURE.md, "Host timing"): it turns what
// each stage of the pipeline costs per batch, in CPU seconds of one core, into the time each
// batch is ready at the host link, on the target host's cores.
//
// Each stage runs on `threads` threads; when the pipeline's threads outnumber the cores given to
// it, every thread gets an equal share of a core (effective threads = threads x cores / all
// threads). A stage then takes cost / effective threads of wall time per batch. With a prefetch
// depth of at least 1 the stages overlap across batches like a production line: batch k leaves
// stage i when it has left stage i-1 and stage i has finished batch k-1,
//   done_i(k) = max(done_{i-1}(k), done_i(k-1)) + cost_i(k) / effective_threads_i,
// so the steady rate is set by the slowest stage. With depth 0 nothing is produced ahead of the
// infeed, and a batch's stages run one after another: done(k) = done(k-1) + sum_i of the same.
// The run-ahead is not bounded by the prefetch depth (the model does not see the device take
// batches); with constant costs that changes no arrival time, because a pipeline faster than
// the device never makes it wait and a slower one never has a batch in hand.

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

  // A batch whose stages cost `cpu_seconds` (one per stage, CPU seconds of one core); returns
  // the time it is ready at the link, in seconds from the pipeline's start.
  double add_batch(const std::vector<double>& cpu_seconds);

  const std::vector<HostStage>& stages() const { return stages_; }
  uint32_t cpu_cores() const { return cpu_cores_; }
  uint32_t prefetch_depth() const { return prefetch_depth_; }
  double effective_threads(size_t stage) const { return effective_[stage]; }
  uint64_t batches() const { return history_.size(); }
  // Wall seconds each stage has been busy so far, and the busiest one: the bottleneck.
  const std::vector<double>& busy_seconds() const { return busy_; }
  size_t busiest_stage() const;
  // The same batches replayed with `stage` on `threads` threads: what-if figures.
  HostPipelineModel with_threads(size_t stage, uint32_t threads) const;
  double last_ready_seconds() const { return ready_.empty() ? 0 : ready_.back(); }

  // [start, end) wall seconds of one batch in each stage: what a trace shows per stage.
  using StageSpans = std::vector<std::pair<double, double>>;
  // Starts keeping each new batch's spans until take_spans() hands them over (for traces).
  void record_spans(bool on) { record_spans_ = on; }
  std::vector<StageSpans> take_spans() { return std::move(spans_); }

 private:
  std::vector<HostStage> stages_;
  uint32_t cpu_cores_;
  uint32_t prefetch_depth_;
  std::vector<double> effective_;
  std::vector<double> done_;  // per stage: when it finished its last batch
  std::vector<double> busy_;
  std::vector<std::vector<double>> history_;
  std::vector<double> ready_;
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

// The standard pipeline's stages: read (read_threads), map (map_threads), batch and enqueue
// (one thread each).
std::vector<HostStage> standard_stages(uint32_t read_threads, uint32_t map_threads);
// Each standard stage's CPU seconds for a batch of `batch_size` such examples, from the host
// config's stage costs.
std::vector<double> standard_stage_seconds(const config::HostStageCostsSpec& costs,
                                           const ExampleWork& example, uint64_t batch_size);

}  // namespace tpusim::runtime
