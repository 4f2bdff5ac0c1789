#include "estimator/jobs/validation.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "common/strings.h"
#include "configs/loader.h"
#include "configs/overrides.h"
#include "estimator/estimator.h"
#include "estimator/jobs/bert_job.h"
#include "estimator/jobs/fashion_job.h"
#include "runtime/models/bert.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {
namespace {

// A measured case's source: Google's MLPerf Training `submission` (round, system, benchmark and
// framework), bfloat16, the step read from its results log's timestamps (docs/validation.md,
// "The measured cases").
std::string mlperf(const char* submission) {
  return str_cat("MLPerf Training ", submission,
                 ", bfloat16: the step from the results log's timestamps");
}

// A fresh scratch folder for a case's checkpoints, in the system's temporary folder ($TMPDIR).
absl::StatusOr<std::string> scratch_dir(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec) return absl::FailedPreconditionError(str_cat("no temporary folder: ", ec.message()));
  std::random_device entropy;
  return (temp / str_cat("tpusim-validate-", name, "-", entropy())).string();
}

using CaseFunctions = std::pair<estimator::ModelFn, estimator::InputFn>;

// An image case: the reference's synthetic images, momentum 0.9 (the rate does not change a
// timing-only step), mixed_bfloat16.
absl::StatusOr<CaseFunctions> image_case(const ValidationCase& c,
                                         estimator::SimulatorOptions* sim) {
  FashionData data;
  data.synthetic = true;
  if (auto s = use_model_inputs(c.model, /*side_given=*/false, &data); !s.ok()) return s;
  if (auto s = use_host_config_timing(data, sim); !s.ok()) return s;
  runtime::OptimizerSpec momentum;
  momentum.kind = runtime::OptimizerSpec::Kind::kMomentum;
  momentum.learning_rate.initial = 0.1f;
  return CaseFunctions{
      zoo_model_fn(c.model, momentum, runtime::models::DTypePolicy::kMixedBFloat16),
      fashion_train_input(data)};
}

// A BERT case: synthetic pretraining features at the case's length, LAMB (MLPerf's BERT),
// mixed_bfloat16.
absl::StatusOr<CaseFunctions> bert_case(const ValidationCase& c, estimator::SimulatorOptions* sim) {
  BertData data;
  data.synthetic = true;
  data.seq_length = c.seq_length;
  if (auto s = use_bert_host_config_timing(data, sim); !s.ok()) return s;
  return CaseFunctions{
      bert_model_fn(c.model, bert_lamb(1e-4f), runtime::models::DTypePolicy::kMixedBFloat16),
      bert_train_input(data)};
}

}  // namespace

const std::vector<ValidationCase>& validation_cases() {
  static const std::vector<ValidationCase> kCases = {
      {"resnet50-v2-8", "resnet50", "v2-8", 1024, 4473,
       mlperf("v0.5, Google's v2-8 resnet, TensorFlow 1.12")},
      {"resnet50-v3-8", "resnet50", "v3-8", 1024, 7459,
       mlperf("v0.5, Google's v3-8 resnet, TensorFlow 1.12")},
      {"resnet50-v3-32", "resnet50", "v3-32", 4096, 31226,
       mlperf("v0.6, Google's tpu-v3-32 resnet, TensorFlow 1.14")},
      {"resnet50-v4-16", "resnet50", "v4-16", 2048, 27823,
       mlperf("v0.7 research, Google's tpu-v4-16-TF resnet")},
      {"resnet50-v4-128", "resnet50", "v4-128", 8192, 220800,
       mlperf("v1.0, Google's tpu-v4-128-TF resnet")},
      // About 1.30 M images a second: 25.2 ms a step.
      {"resnet50-v3-2048", "resnet50", "v3-2048", 32768, 1.30e6,
       mlperf("v0.6, Google's tpu-v3-2048 resnet")},
      // The BERT logs give the step time (460 and 233 ms): the rate is the global batch over it.
      {"bert_large-512-v3-32", "bert_large", "v3-32", 448, 448 / 0.460,
       mlperf("v0.7, Google's tpu-v3-32-TF2.0 bert"), 512},
      {"bert_large-512-v4-16", "bert_large", "v4-16", 256, 256 / 0.233,
       mlperf("v0.7 research, Google's tpu-v4-16-TF bert"), 512},
  };
  return kCases;
}

std::string validation_case_pending(const ValidationCase& c) {
  auto info = runtime::models::model_info(c.model);
  return info.ok() ? "" : str_cat("model '", c.model, "' is not in the zoo yet");
}

double step_time_error(double predicted_seconds, double measured_seconds) {
  return predicted_seconds / measured_seconds - 1;
}

std::optional<double> steady_step_seconds(const std::vector<traces::StepBreakdown>& steps) {
  if (steps.size() < 3) return std::nullopt;
  double inner = 0;
  for (size_t i = 1; i + 1 < steps.size(); ++i) inner += steps[i].seconds;
  return inner / static_cast<double>(steps.size() - 2);
}

absl::StatusOr<ValidationResult> run_validation_case(
    const ValidationCase& c, int64_t steps, const std::function<void(const std::string&)>& log,
    const SliceEdits& edits) {
  if (std::string pending = validation_case_pending(c); !pending.empty())
    return absl::FailedPreconditionError(str_cat(c.name, ": ", pending));
  if (steps < 1 || steps > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(str_cat(
        c.name, ": ", steps, " steps is no loop (1 to 4294967295 steps: iterations_per_loop)"));
  }
  auto slice = config::load_slice(c.slice);
  if (!slice.ok()) return slice.status();
  estimator::RunConfig config;
  estimator::SimulatorOptions sim;
  auto scratch = scratch_dir(c.name);
  if (!scratch.ok()) return scratch.status();
  config.model_dir = *std::move(scratch);
  sim.slice = c.slice;
  if (!edits.empty()) {
    // The edited slice as a config file in the model_dir, which the run loads like any other.
    auto edited = config::with_overrides(**slice, edits, c.slice);
    if (!edited.ok()) return edited.status();
    std::error_code ec;
    std::filesystem::create_directories(config.model_dir, ec);
    sim.slice = config.model_dir + "/slice.pbtxt";
    std::ofstream out(sim.slice);
    out << config::to_config_text(**edited);
    if (!out.flush())
      return absl::InternalError(str_cat("cannot write the edited slice to ", sim.slice));
    slice = std::move(edited);
  }
  config.tpu_config.num_shards = (*slice)->cores;
  config.tpu_config.iterations_per_loop = static_cast<uint32_t>(steps);
  config.save_checkpoints_steps = steps;
  sim.timing_only = true;
  sim.fold_replicas = (*slice)->hosts > 1;
  sim.log = log;
  // The gradients summed as TPU pods sum them: the 2-D algorithm (reduce-scatter along one
  // dimension, all-reduce along the other, all-gather back; [Ying18] in docs/references.md),
  // each gradient's all-reduce overlapped with the backward pass.
  sim.compile.allreduce = runtime::AllReduceAlgorithm::kTorus2d;
  auto job = runtime::models::is_bert(c.model) ? bert_case(c, &sim) : image_case(c, &sim);
  if (!job.ok()) return job.status();
  auto est = estimator::TPUEstimator::create(job->first, config, {}, true, c.global_batch,
                                             c.global_batch, c.global_batch, sim);
  if (!est.ok()) return est.status();
  auto trained = (*est)->train(job->second, steps);
  std::error_code ignored;
  std::filesystem::remove_all(config.model_dir, ignored);
  if (!trained.ok()) return trained.status();
  ValidationResult r;
  r.loop_step_seconds = trained->sim_seconds_per_step;
  r.step_seconds = r.loop_step_seconds;
  if (trained->analysis.has_value()) {
    if (auto steady = steady_step_seconds(trained->analysis->steps); steady.has_value()) {
      r.step_seconds = *steady;
      r.steady_state = true;
    }
  }
  r.examples_per_second = static_cast<double>(c.global_batch) / r.step_seconds;
  r.mxu_utilization = trained->mxu_utilization;
  r.host_seconds = trained->host_seconds;
  return r;
}

}  // namespace tpusim::jobs
