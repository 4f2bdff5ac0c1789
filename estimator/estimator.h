#pragma once
// TPUEstimator in C++ (docs/architecture.md, "The estimator"; docs/references.md, "TPUEstimator
// semantics users rely on"), so the seeds' programs read almost line for line:
//
//   RunConfig config;
//   config.model_dir = "/tmp/mnist";
//   config.tpu_config.iterations_per_loop = 50;
//   auto est = TPUEstimator::create(model_fn, config, {}, /*use_tpu=*/true, /*train=*/1024,
//                                   /*eval=*/1024, /*predict=*/1024);
//   auto result = (*est)->train(input_fn, /*max_steps=*/600);
//
// input_fn(params) returns a Dataset of per-shard batches (params.batch_size is the global batch
// over the shards); the component named "label" is the labels and the others the features.
// model_fn(builder, features, labels, mode, params) builds the step and returns a
// TPUEstimatorSpec. Training wraps the optimizer in CrossShardOptimizer (MEAN): every replica
// differentiates its own loss scaled by 1/num_shards and the gradients are summed over the
// replicas. The backend compiles the step once and runs iterations_per_loop steps per host
// loop; the host loop's round trip (the host config's loop_overhead_us) is charged once per
// loop; summaries, logs and checkpoints happen at loop boundaries.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "estimator/saved_model.h"
#include "runtime/backend/backend.h"
#include "runtime/data/dataset.h"
#include "runtime/data/stage_profile.h"
#include "runtime/graph/builder.h"
#include "runtime/graph/optimizers.h"
#include "runtime/infeed/host_model.h"
#include "runtime/infeed/stall_watch.h"
#include "traces/analyzer.h"

namespace tpusim::estimator {

enum class Mode { kTrain, kEval, kPredict };
const char* mode_name(Mode mode);

struct Params {
  int64_t batch_size = 0;    // per shard: the global batch size / num_shards
  uint32_t shard_index = 0;  // per-shard input (per_host_input_for_training = false)
  uint32_t num_shards = 1;
  // input_fn may mark its stages here (Dataset::profiled, StageProfile::timed) for the host
  // timing model; unmarked work is not charged to the host.
  std::shared_ptr<runtime::data::StageProfile> profile;
  std::map<std::string, double> values;  // the user's params
};

using Features = std::map<std::string, runtime::Value>;

// Host-side metrics over what the eval steps outfeed: each metric tensor's values from every
// step and replica, stacked along dimension 0.
using MetricFn = std::function<absl::StatusOr<std::map<std::string, double>>(
    const std::map<std::string, runtime::HostTensor>& tensors)>;

// host_call's function: every train step's outfed tensors (each stacked over the replicas along
// dimension 0) with that step's global step, run on the host after the device loop.
using HostCallFn = std::function<absl::Status(
    int64_t global_step, const std::map<std::string, runtime::HostTensor>& tensors)>;

struct TPUEstimatorSpec {
  runtime::Value loss;                             // train, eval: a scalar
  std::optional<runtime::OptimizerSpec> train_op;  // train
  MetricFn metric_fn;                              // eval_metrics = (metric_fn, metric_tensors)
  std::map<std::string, runtime::Value> metric_tensors;
  std::map<std::string, runtime::Value> predictions;  // predict: leading dimension the batch
  // host_call = (host_call_fn, host_call_tensors), train only: the tensors are outfed every
  // step (their transfer is part of the simulated step).
  HostCallFn host_call_fn;
  std::map<std::string, runtime::Value> host_call_tensors;
  // Scaffold's init_fn (TPUEstimatorSpec.scaffold_fn), train only: runs on the freshly
  // initialized variables (after any warm start) when model_dir has no checkpoint to restore,
  // to load or adjust weights; a resumed run restores instead. Its error stops the training.
  std::function<absl::Status(runtime::Variables* variables)> init_fn;
};

using ModelFn = std::function<absl::StatusOr<TPUEstimatorSpec>(
    runtime::GraphBuilder& b, const Features& features, std::optional<runtime::Value> labels,
    Mode mode, const Params& params)>;
using InputFn = std::function<absl::StatusOr<runtime::data::DatasetPtr>(const Params& params)>;

// tf.compat.v1.estimator.tpu.TPUConfig.
struct TPUConfig {
  uint32_t iterations_per_loop = 100;
  uint32_t num_shards = 8;
  bool per_host_input_for_training = true;
};

// tf.compat.v1.estimator.tpu.RunConfig: what a TPUEstimator program configures, by TensorFlow's
// names and with its defaults. How tpusim runs the program is SimulatorOptions'.
struct RunConfig {
  std::string model_dir;
  int64_t save_checkpoints_steps = 1000;
  int64_t save_summary_steps = 100;
  int64_t log_step_count_steps = 100;
  int keep_checkpoint_max = 5;
  TPUConfig tpu_config;
};

// How tpusim runs a TPUEstimator program, which TensorFlow has no place for (a real program runs
// on the TPU it is given): the backend and the slice it simulates, how the step is compiled, how
// the host's input pipeline is charged, what is simulated and recorded, and where progress goes.
struct SimulatorOptions {
  // The backend by its registry name (runtime/backend/registry.h): "tpusim" (use_tpu), "cpu",
  // "gpu". A backend that runs a slice runs `slice`, whose host config times the input.
  std::string backend = "tpusim";
  std::string slice = "v3-8";
  // How the step is compiled (runtime/backend/compile_options.h): precision, the all-reduces,
  // fusion. The estimator sets `replicas` (num_shards) and `simulated_replicas` (fold_replicas)
  // itself; an option the backend does not support is refused by create(), naming the backends
  // that do (runtime/backend/registry.h).
  runtime::CompileOptions compile;
  // On tpusim, how the host input pipeline's time is charged. kMeasured: what the real
  // pipeline's stages took on this machine (it varies run to run with the machine's load).
  // kHostConfig: the slice's host config costs (HostStageCosts) for `host_work` per example
  // on the standard read -> map -> batch -> enqueue stages: the same every run, for sweeps.
  enum class HostTiming { kMeasured, kHostConfig };
  HostTiming host_timing = HostTiming::kMeasured;
  runtime::ExampleWork host_work;  // kHostConfig: one example's work
  uint32_t host_read_threads = 1;  // kHostConfig: the read, map and batch stages' threads
  uint32_t host_map_threads = 1;
  uint32_t host_batch_threads = 1;
  // Either mode: the threads that enqueue each step's batches for the cores (the infeed driver's
  // conversion, TensorFlow's per-core infeed enqueue ops; HostTiming::enqueue_threads).
  uint32_t host_enqueue_threads = 1;
  // Float input components the host casts to bfloat16 for the infeed, as TPU input_fns cast
  // images: half the bytes over the host link (the tpusim backend widens them to f32 as they
  // land). The model_fn gets them as f32 holding bf16 values. Train, evaluate and predict.
  // With kHostConfig timing, halving host_work.batch_bytes to match is the caller's part.
  std::set<std::string> bf16_infeeds;
  // Simulate time only: the device's numerics are skipped (losses read 0, the weights stay as
  // they start) while the input pipeline runs for real. The tpusim backend only.
  bool timing_only = false;
  // train, timing only: replica folding (docs/architecture.md, "Scale"; CompileOptions::
  // simulated_replicas). Only the first host's replicas run their steps cycle-level, fed by its
  // input pipeline; every other replica only joins the collectives, so a pod's interconnect is
  // simulated in full at the cost of one host's cores. A slice with one host has nothing to fold.
  bool fold_replicas = false;
  // train: a trace of the device loops holding global steps [trace_first_step, trace_last_step]
  // (Perfetto for .pftrace, Chrome JSON for .json; traces/trace_writer.h). "" for none.
  std::string trace_path;
  int64_t trace_first_step = 0;
  int64_t trace_last_step = INT64_MAX;
  // train: an XProf profile (docs/profiling.md, "In XProf") of the device loops holding global
  // steps [profile_first_step, profile_last_step], written to
  // MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb (RUN: the UTC time it was started,
  // YYYY_MM_DD_HH_MM_SS, as TensorFlow's profiler names runs). The tpusim backend only.
  bool profile = false;
  int64_t profile_first_step = 0;
  int64_t profile_last_step = INT64_MAX;
  // train: rate counters in the trace file (link utilisation, HBM bandwidth) averaged over
  // windows of this many nanoseconds, one sample per window at most
  // (traces/counter_binning_sink.h); 0: every change, exactly.
  uint64_t trace_counter_window_ns = 0;
  // train, evaluate: an input pipeline that gives no batch for this many seconds is reported in
  // the log (then each time the wait doubles), naming the pipeline, the step and its stages so
  // far (runtime::InfeedOptions::stall_report_seconds); 0: never.
  double input_stall_report_seconds = 60;
  // predict: an input with more batches than this is taken for one that never ends.
  size_t max_predict_batches = size_t{1} << 20;
  std::function<void(const std::string&)> log;  // progress lines; stderr when unset
  // train: called with (global step, max_steps) as the device finishes each step (on tpusim,
  // within a device loop; on other backends, once per loop).
  std::function<void(int64_t, int64_t)> progress;
};

struct TrainResult {
  int64_t global_step = 0;
  int64_t steps_run = 0;  // by this call
  // False when the run computed no values (SimulatorOptions::timing_only): final_loss and losses
  // are then not the model's and must not be shown as figures.
  bool values_computed = true;
  double final_loss = 0;
  double host_seconds = 0;
  double sim_seconds = 0;  // device loops plus host round trips, simulated
  double sim_seconds_per_step = 0;
  double infeed_wait_fraction = 0;  // of the device loops' time, the most-waiting core's
  double mxu_utilization = 0;
  // Where the simulated time went, in seconds over the steps run: the device loops (of which
  // the most-waiting core waited `input_seconds` on its infeed) and the host round trips.
  double device_seconds = 0;
  double input_seconds = 0;
  double host_overhead_seconds = 0;
  std::string weights_fingerprint;  // empty when a timing-only run trained (no values)
  std::vector<float> losses;        // replica 0's loss at every step run
  // Where each step's simulated time went and what to change (traces/analyzer.h); absent on
  // backends without a simulated timeline.
  std::optional<traces::Analysis> analysis;
  uint64_t trace_bytes = 0;  // of the trace file, when one was asked for
  std::string profile_path;  // the XProf profile written (SimulatorOptions::profile), or ""
  // Per graph op on chip 0, per step (FLOPs, HBM bytes and seconds averaged over the steps run),
  // in program order, and the chip's roofs: the roofline's points. Empty on backends without a
  // simulated timeline.
  std::vector<runtime::OpTiming> ops;
  runtime::ChipRoofs roofs;
  runtime::HbmFloor hbm_floor;  // of one step on chip 0 (runtime/graph/hbm_floor.h)
};

struct EvalResult {
  std::map<std::string, double> metrics;  // as evaluate() returns them
  std::optional<traces::Analysis> analysis;
  std::string profile_path;  // the XProf profile written (SimulatorOptions::profile), or ""
};

class TPUEstimator {
 public:
  // TensorFlow's constructor: use_tpu false runs on the cpu backend. `warm_start_from`: when
  // model_dir has no checkpoint yet, start from this checkpoint (a file, or a folder's newest):
  // every model variable it has with the same shape; optimizer slots and the global step start
  // afresh, as with TensorFlow's warm start. `simulator`: how tpusim runs it.
  static absl::StatusOr<std::unique_ptr<TPUEstimator>> create(
      ModelFn model_fn, RunConfig config, Params params, bool use_tpu, int64_t train_batch_size,
      int64_t eval_batch_size, int64_t predict_batch_size, SimulatorOptions simulator = {},
      std::string warm_start_from = "");
  ~TPUEstimator();

  // Trains until the global step reaches `max_steps`, resuming from model_dir's newest
  // checkpoint (with the input fast-forwarded to it, so a resumed run sees the same batches as
  // an uninterrupted one).
  absl::StatusOr<TrainResult> train(const InputFn& input_fn, int64_t max_steps);

  // Evaluates model_dir's newest checkpoint on `steps` steps of eval batches (one device loop;
  // iterations_per_loop does not apply). The eval input must not end early. Returns metric_fn's
  // metrics over every step and replica, with "loss" (the mean) and "global_step"; also written
  // as summaries to model_dir/eval.
  absl::StatusOr<std::map<std::string, double>> evaluate(const InputFn& input_fn, int64_t steps);
  // The same, with where the eval loop's simulated time went (absent on backends without a
  // timeline). The host pipeline is timed as train's is (SimulatorOptions::host_timing).
  absl::StatusOr<EvalResult> evaluate_with_analysis(const InputFn& input_fn, int64_t steps);

  // One map of predictions per example of the predict input, in order. The input must end; its
  // batches are per-shard sized, the last padded (Dataset::batch with pad_to_full), and the
  // padding (mask 0) is dropped. Steps too short of batches for every replica get padding too.
  using Prediction = std::map<std::string, runtime::HostTensor>;
  absl::StatusOr<std::vector<Prediction>> predict(const InputFn& input_fn);

  // Writes model_fn's predict step for `batch_size` examples at a time, with model_dir's newest
  // checkpoint, as a saved model in `dir` (saved_model.h). `features`: each input's name, dtype
  // and shape of one example.
  absl::Status export_saved_model(const std::string& dir, const std::vector<TensorSpec>& features,
                                  int64_t batch_size);

  const RunConfig& config() const { return config_; }
  const SimulatorOptions& simulator() const { return sim_; }
  runtime::Backend& backend() { return *backend_; }

 private:
  TPUEstimator(ModelFn model_fn, RunConfig config, SimulatorOptions sim, Params params,
               int64_t train_batch_size, int64_t eval_batch_size, int64_t predict_batch_size);
  void log(const std::string& line) const;
  // A watch over the estimator's own reads of the host input (train's and evaluate's first
  // batch, predict's batches) reporting through log() after input_stall_report_seconds, as the
  // infeed driver watches its pulls; null when that is 0.
  std::unique_ptr<runtime::StallWatch> stall_watch() const;
  // The user's params for one input_fn call at `per_shard_batch`, with a fresh stage profile.
  Params input_params(int64_t per_shard_batch) const;
  absl::Status warm_start(const std::string& from, runtime::Variables* variables);
  struct Compiled;
  // model_fn in `mode` over infeeds shaped like `first`, its outputs added by `add_outputs`,
  // compiled for the replicas, with the newest checkpoint's variables (required outside train).
  absl::StatusOr<Compiled> compile_for(Mode mode, const runtime::data::Element& first,
                                       int64_t per_shard_batch);

  ModelFn model_fn_;
  RunConfig config_;
  SimulatorOptions sim_;
  std::string warm_start_from_;
  Params params_;
  int64_t train_batch_size_, eval_batch_size_, predict_batch_size_;
  std::unique_ptr<runtime::Backend> backend_;
};

}  // namespace tpusim::estimator
