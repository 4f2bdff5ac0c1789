#pragma once
// The infeed driver (docs/architecture.md, "The walk of a training run", step 4): for each device
// loop it pulls the loop's batches from the host input pipelines, splits each host batch over the
// cores it feeds, turns the components into the graph's infeed tensors, and gives each step the
// host timeline that says when its batches are ready. The backend then sends them over the host
// link into each core's bounded infeed queue (the tpusim backend, which tells the timeline when
// each step was taken: the host's prefetch buffer is bounded) or just computes.
//
// Pipelines and cores: with P pipelines and R replicas, pipeline p feeds replicas
// p*R/P .. (p+1)*R/P - 1. Its batches are split evenly along dimension 0 over them (one pipeline
// per host: TPUEstimator's per_host_input_for_training, PER_HOST_V1), or, with
// deal_per_core_batches, each batch is one replica's and its replicas take them in turn
// (PER_HOST_V2, where input_fn batches at the per-core size). One pipeline per replica is
// per-core input.
//
// Host time: every pipeline starts at host time 0 (the device time of the first loop's start) and
// runs on its own share of the host's cores.
// A step is ready when the last of its pipelines has its batch. Deterministic mode charges each
// stage a fixed cost per batch (from the host config); measured mode charges what the
// pipeline's StageProfile measured since the previous batch, and the driver's own CPU time for
// the split and conversion (on HostTiming::enqueue_threads threads) as the "enqueue" stage.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/data/dataset.h"
#include "runtime/data/stage_profile.h"
#include "runtime/infeed/host_model.h"
#include "runtime/infeed/host_timeline.h"
#include "runtime/infeed/stall_watch.h"

namespace tpusim::runtime {

struct InputPipeline {
  data::DatasetPtr dataset;  // yields batches: every component has the batch dimension first
  // Measured mode: the profile the dataset's stages record into (stages in pipeline order).
  std::shared_ptr<data::StageProfile> profile;
};

struct HostTiming {
  uint32_t cpu_cores = 1;       // the host's cores, shared by the pipelines it runs
  uint32_t hosts = 1;           // pipelines are spread evenly over the hosts
  uint32_t prefetch_depth = 2;  // the dataset's final prefetch
  // Threads that turn a step's batches into each replica's infeed tensors at once (TensorFlow
  // runs a host's per-core infeed enqueue ops in parallel); measured mode's "enqueue" stage
  // runs on this many.
  uint32_t enqueue_threads = 1;
  // Deterministic mode: the stages and their CPU seconds per batch. Left empty, the driver
  // measures (every pipeline needs a profile) and adds an "enqueue" stage of its own.
  std::vector<HostStage> stages;
  std::vector<double> stage_seconds;
};

struct InfeedOptions {
  uint32_t replicas = 1;
  // Component name -> infeed name, where they differ; other components feed the infeed of their
  // own name, and components no infeed takes (a "mask", say) are left on the host.
  std::map<std::string, std::string> infeed_of;
  bool deal_per_core_batches = false;
  HostTiming timing;
  // A pull that waits this long for a pipeline's batch is reported through `log`, again each
  // time the wait doubles, and once more when the batch comes: a source or map function that
  // never returns is named, with the pipeline's stages so far, instead of hanging silently.
  // 0, or no `log`: not watched.
  double stall_report_seconds = 60;
  std::function<void(const std::string&)> log;
};

// A stall watch's report on a wait for an input pipeline's next element: `subject` names the
// pipeline ("input pipeline 0"), `item` what it waits for ("batch for step 3"), `profile` (may be
// null) gives its stages so far. "<subject>: no <item> after 60.0 s, still waiting (...)" while
// it waits, "<subject>: <item> came after 61.2 s" once it came.
std::string input_wait_report(const std::string& subject, const std::string& item,
                              const data::StageProfile* profile, double seconds, bool ended);

// it.next() under `watch` (null: not watched), its wait reported by input_wait_report. The
// infeed driver's pulls and the estimator's own reads (train's and evaluate's first batch,
// predict's batches) go through it.
absl::StatusOr<std::optional<data::Element>> next_watched(data::Iterator& it, StallWatch* watch,
                                                          const std::string& subject,
                                                          const std::string& item,
                                                          const data::StageProfile* profile);

// The host memory a loop of `steps` steps holds in its feeds (every infeed of `graph`, for each
// of `replicas` replicas, each step: next_loop converts a whole loop's input before the device
// runs it, as the loop's infeed enqueues are queued ahead of it), checked against the host's
// memory budget before a batch is pulled. ResourceExhausted names `steps_flag` (the flag that
// sets the loop's length) and both sizes.
absl::Status check_loop_memory(const Graph& graph, uint32_t replicas, uint64_t steps,
                               const std::string& steps_flag);

class InfeedDriver {
 public:
  static absl::StatusOr<std::unique_ptr<InfeedDriver>> create(const Graph& graph,
                                                              std::vector<InputPipeline> pipelines,
                                                              InfeedOptions options);

  // The next `steps` steps, each with the host timeline to ask when it is ready.
  // `device_now_seconds` is the backend's device time now; the first call's is when every input
  // pipeline started. OutOfRange when a pipeline ends first, saying how many steps it gave;
  // errors of a pipeline come with its index and the step.
  absl::StatusOr<std::vector<LoopStep>> next_loop(uint32_t steps, double device_now_seconds);
  // Reads and drops `steps` steps' batches, charging the host model nothing: a resumed run
  // fast-forwards its (deterministic) input to where the checkpoint left it.
  absl::Status skip(uint64_t steps);

  // The host model of each pipeline (batches so far, stage busy time, what-if replays).
  const std::vector<HostPipelineModel>& host_models() const { return timeline_->models(); }
  std::vector<HostPipelineModel>& host_models() { return timeline_->models(); }
  HostTimeline& host_timeline() { return *timeline_; }
  uint64_t steps_taken() const { return steps_taken_; }

 private:
  struct Feed {
    std::string infeed;
    DType dtype;
    Shape shape;  // per replica
  };
  InfeedDriver(std::vector<InputPipeline> pipelines, InfeedOptions options, std::vector<Feed> feeds,
               std::shared_ptr<HostTimeline> timeline);
  // One step's batches of `pipeline` into `replicas` (null: read and drop them, charging the
  // host model nothing).
  absl::Status pull(size_t pipeline, std::vector<Feeds>* replicas);
  // The enqueue of one step's `batches` of `pipeline`: each of its replicas' rows converted into
  // that replica's feeds, on up to HostTiming::enqueue_threads threads at once (TensorFlow runs
  // a host's per-core infeed enqueue ops in parallel). The CPU seconds it took per batch.
  absl::StatusOr<std::vector<double>> enqueue(size_t pipeline,
                                              const std::vector<data::Element>& batches,
                                              std::vector<Feeds>& replicas) const;
  // Part `part` of `parts` equal parts of `batch` along dimension 0 (one replica's rows) into
  // that replica's `feeds`. Thread-safe for distinct feeds.
  absl::Status convert(const data::Element& batch, int64_t part, int64_t parts, Feeds& feeds) const;

  std::vector<InputPipeline> pipelines_;
  std::vector<std::unique_ptr<data::Iterator>> iterators_;
  InfeedOptions options_;
  std::vector<Feed> feeds_;
  std::shared_ptr<HostTimeline> timeline_;
  std::vector<std::vector<double>> last_cpu_;  // measured mode: per pipeline, per stage
  uint64_t steps_taken_ = 0;
  std::unique_ptr<StallWatch> stall_watch_;  // null: not watched
};

}  // namespace tpusim::runtime
