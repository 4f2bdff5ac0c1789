#include "estimator/estimator.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator_internal.h"
#include "estimator/summary_writer.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/initializers.h"
#include "runtime/infeed/infeed_driver.h"

namespace tpusim::estimator {
namespace internal {
namespace {

namespace data = runtime::data;

// A dataset over an iterator whose first element was already read (to learn the shapes the
// graph's infeeds take); its one iterator yields that element, then the rest.
class PeekedDataset final : public data::Dataset {
 public:
  PeekedDataset(data::Element first, std::unique_ptr<data::Iterator> rest)
      : state_(std::make_shared<State>(State{std::move(first), std::move(rest), false})) {}
  std::unique_ptr<data::Iterator> make_iterator() const override {
    class It final : public data::Iterator {
     public:
      explicit It(std::shared_ptr<State> s) : s_(std::move(s)) {}
      absl::StatusOr<std::optional<data::Element>> next() override {
        if (!s_->first_taken) {
          s_->first_taken = true;
          return std::optional<data::Element>(std::move(s_->first));
        }
        return s_->rest->next();
      }

     private:
      std::shared_ptr<State> s_;
    };
    return std::make_unique<It>(state_);
  }

 private:
  struct State {
    data::Element first;
    std::unique_ptr<data::Iterator> rest;
    bool first_taken;
  };
  std::shared_ptr<State> state_;
};

}  // namespace

absl::StatusOr<data::DatasetPtr> call_input_fn(const InputFn& input_fn, const Params& params) {
  try {
    return input_fn(params);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        str_cat("input_fn ran out of host memory building its dataset (", params.batch_size,
                " examples a shard): a batch too big for this host; a smaller batch size?"));
  }
}

data::DatasetPtr peeked(data::Element first, std::unique_ptr<data::Iterator> rest) {
  return std::make_shared<PeekedDataset>(std::move(first), std::move(rest));
}

using runtime::DType;
using runtime::Value;

bool trained(const std::string& variable) {
  // Batch-norm statistics are updated by the model, not by gradients.
  return !runtime::is_statistic(variable) && variable != "global_step";
}

// Infeeds shaped like one per-shard batch: "label" is the labels, the rest the features (and
// "mask", a predict batch's padding marker, neither).
absl::Status build_infeeds(runtime::GraphBuilder& b, const data::Element& first,
                           const std::set<std::string>& bf16, Features* features,
                           std::optional<Value>* labels) {
  for (const std::string& name : bf16) {
    if (name == "mask") {
      return absl::InvalidArgumentError(
          "bf16_infeeds names 'mask', a predict batch's padding marker, which stays on the host");
    }
    const auto it = first.find(name);
    if (it == first.end()) {
      return absl::InvalidArgumentError(str_cat(
          "bf16_infeeds names '", name, "', which is not a component of the input's batches"));
    }
    if (it->second.type != data::FeatureType::kFloat) {
      return absl::InvalidArgumentError(str_cat("bf16_infeeds names '", name, "', which holds ",
                                                data::feature_type_name(it->second.type),
                                                "; only float components go as bf16"));
    }
  }
  for (const auto& [name, value] : first) {
    if (name == "mask") continue;
    if (value.type == data::FeatureType::kBytes) {
      return absl::InvalidArgumentError(
          str_cat("input component '", name, "' holds bytes; decode it in input_fn"));
    }
    const DType dtype = value.type == data::FeatureType::kInt64 ? DType::kS32 : DType::kF32;
    // A bf16 infeed carries the host's bfloat16 cast; the model sees its values as f32.
    const bool half = bf16.count(name) > 0;
    const Value fed = b.infeed(name, half ? DType::kBF16 : dtype, runtime::Shape(value.shape));
    const Value v = half ? b.cast(fed, DType::kF32) : fed;
    if (name == "label") {
      *labels = v;
    } else {
      (*features)[name] = v;
    }
  }
  return absl::OkStatus();
}

// The checkpoint's value for every variable of `variables`; errors name the missing or
// mismatched one.
absl::Status restore(const Checkpoint& ckpt, runtime::Variables* variables) {
  for (auto& [name, value] : *variables) {
    auto it = ckpt.variables.find(name);
    if (it == ckpt.variables.end()) {
      return absl::NotFoundError(
          str_cat("checkpoint ", ckpt.path, " has no variable '", name, "' that the model needs"));
    }
    if (it->second.shape != value.shape || it->second.dtype != value.dtype) {
      return absl::InvalidArgumentError(
          str_cat("checkpoint ", ckpt.path, ": variable '", name, "' is ",
                  runtime::dtype_name(it->second.dtype), it->second.shape.str(), "; the model has ",
                  runtime::dtype_name(value.dtype), value.shape.str()));
    }
    value = it->second;
  }
  return absl::OkStatus();
}

// Optimizer state and the step counter, which a warm start leaves fresh.
bool optimizer_state(const std::string& variable) {
  return variable == "global_step" || variable == "beta1_power" || variable == "beta2_power" ||
         variable.find("/Momentum") != std::string::npos ||
         variable.find("/Adam") != std::string::npos;
}

// Stacks tensors of equal trailing shape along dimension 0.
runtime::HostTensor stack(const std::vector<const runtime::HostTensor*>& parts) {
  runtime::HostTensor out;
  out.dtype = parts.front()->dtype;
  std::vector<int64_t> dims = parts.front()->shape.dims();
  if (dims.empty()) dims.push_back(1);
  int64_t rows = 0;
  for (const auto* p : parts) {
    rows += p->shape.rank() == 0 ? 1 : p->shape.dim(0);
    out.f.insert(out.f.end(), p->f.begin(), p->f.end());
    out.i.insert(out.i.end(), p->i.begin(), p->i.end());
  }
  dims[0] = rows;
  out.shape = runtime::Shape(dims);
  return out;
}

absl::StatusOr<HostSide> host_side(const SimulatorOptions& sim) {
  HostSide host;
  auto backend = runtime::find_backend(sim.backend);
  if (!backend.ok()) return backend.status();
  if (!(*backend)->supports.runs_a_slice) {
    host.cpu_cores = std::max(1u, std::thread::hardware_concurrency());
    return host;
  }
  auto slice = config::load_slice(sim.slice);
  if (!slice.ok()) return slice.status();
  host.hosts = (*slice)->hosts;
  host.cpu_cores = (*slice)->host.cpu_cores;
  host.loop_overhead_s = (*slice)->host.loop_overhead_s;
  host.costs = (*slice)->host.stage_costs;
  const config::ChipSpec& chip = (*slice)->chip;
  // XProf's device type: "TPU v3" for the tpu_v3 chip config (it looks for "TPU" in it).
  host.device_type =
      chip.name.rfind("tpu_", 0) == 0 ? "TPU " + chip.name.substr(4) : "TPU (" + chip.name + ")";
  host.cores_per_chip = std::max(1u, chip.tensor_cores);
  host.core_peak_flops = chip.peak_bf16_flops / host.cores_per_chip;
  host.core_hbm_bytes_per_s = chip.hbm.bandwidth_bytes_per_s / host.cores_per_chip;
  return host;
}

runtime::HostTiming infeed_timing(const SimulatorOptions& sim, const HostSide& host,
                                  int64_t per_shard_batch) {
  runtime::HostTiming timing;
  timing.cpu_cores = host.cpu_cores;
  timing.hosts = host.hosts;
  timing.prefetch_depth = 2;
  timing.enqueue_threads = sim.host_enqueue_threads;
  if (sim.host_timing == SimulatorOptions::HostTiming::kHostConfig) {
    timing.stages = runtime::standard_stages(sim.host_read_threads, sim.host_map_threads,
                                             sim.host_batch_threads, sim.host_enqueue_threads);
    timing.stage_seconds = runtime::standard_stage_seconds(host.costs, sim.host_work,
                                                           static_cast<uint64_t>(per_shard_batch));
  }
  return timing;
}

namespace {

// Where a profile started now goes: MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb, RUN the UTC
// time as TensorFlow's profiler names its runs.
std::string profile_path(const std::string& model_dir, const std::string& host) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char run[32];
  std::strftime(run, sizeof run, "%Y_%m_%d_%H_%M_%S", &utc);
  return (std::filesystem::path(model_dir) / "plugins" / "profile" / run / (host + ".xplane.pb"))
      .string();
}

}  // namespace

TraceRequest::Profile profile_request(const SimulatorOptions& sim, const RunConfig& config,
                                      const HostSide& host, uint32_t shards, uint32_t pipelines,
                                      int64_t first_step, const std::string& program) {
  TraceRequest::Profile p;
  if (!sim.profile) return p;
  p.header.host = "tpusim-host0";
  p.path = profile_path(config.model_dir, p.header.host);
  p.first_step = sim.profile_first_step;
  p.last_step = sim.profile_last_step;
  p.cores_per_chip = host.cores_per_chip;
  p.first_global_step = first_step;
  p.batches_per_step = std::max(1u, shards / std::max(1u, pipelines));
  p.header.device_type = host.device_type;
  p.header.peak_teraflops_per_second = host.core_peak_flops / 1e12;
  p.header.peak_hbm_gigabytes_per_second = host.core_hbm_bytes_per_s / 1e9;
  p.header.program = program;
  return p;
}

}  // namespace internal

namespace data = runtime::data;

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kEval:
      return "eval";
    case Mode::kPredict:
      return "infer";
    default:
      return "train";
  }
}

TPUEstimator::TPUEstimator(ModelFn model_fn, RunConfig config, SimulatorOptions sim, Params params,
                           int64_t train_batch_size, int64_t eval_batch_size,
                           int64_t predict_batch_size)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      sim_(std::move(sim)),
      params_(std::move(params)),
      train_batch_size_(train_batch_size),
      eval_batch_size_(eval_batch_size),
      predict_batch_size_(predict_batch_size) {}

TPUEstimator::~TPUEstimator() = default;

absl::StatusOr<std::unique_ptr<TPUEstimator>> TPUEstimator::create(
    ModelFn model_fn, RunConfig config, Params params, bool use_tpu, int64_t train_batch_size,
    int64_t eval_batch_size, int64_t predict_batch_size, SimulatorOptions simulator,
    std::string warm_start_from) {
  if (!model_fn) return absl::InvalidArgumentError("TPUEstimator: no model_fn");
  if (config.model_dir.empty()) return absl::InvalidArgumentError("RunConfig.model_dir is empty");
  const uint32_t shards = config.tpu_config.num_shards;
  if (shards == 0) return absl::InvalidArgumentError("tpu_config.num_shards must be >= 1");
  if (config.tpu_config.iterations_per_loop == 0)
    return absl::InvalidArgumentError("tpu_config.iterations_per_loop must be >= 1");
  for (auto [name, size] : {std::pair{"train_batch_size", train_batch_size},
                            std::pair{"eval_batch_size", eval_batch_size},
                            std::pair{"predict_batch_size", predict_batch_size}}) {
    if (size < 0) return absl::InvalidArgumentError(str_cat(name, " ", size, " is negative"));
    if (size % shards != 0) {
      return absl::InvalidArgumentError(
          str_cat(name, " ", size, " must be divisible by the ", shards, " replicas (num_shards)"));
    }
  }
  if (!use_tpu) simulator.backend = "cpu";
  std::unique_ptr<TPUEstimator> est(
      new TPUEstimator(std::move(model_fn), std::move(config), std::move(simulator),
                       std::move(params), train_batch_size, eval_batch_size, predict_batch_size));
  est->warm_start_from_ = std::move(warm_start_from);
  const SimulatorOptions& c = est->sim_;
  runtime::RunFeatures features;
  features.timing_only = c.timing_only;
  features.trace = !c.trace_path.empty();
  if (auto s = runtime::check_registered_options(c.backend, c.compile, features); !s.ok()) return s;
  runtime::BackendArgs args;
  args.slice = c.slice;
  auto backend = runtime::make_backend(c.backend, args);
  if (!backend.ok()) return backend.status();
  est->backend_ = *std::move(backend);
  if (auto s = est->backend_->set_timing_only(c.timing_only); !s.ok()) return s;
  return est;
}

absl::Status TPUEstimator::warm_start(const std::string& from, runtime::Variables* variables) {
  absl::StatusOr<Checkpoint> ckpt = absl::NotFoundError("");
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(from, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return absl::FailedPreconditionError(str_cat("warm_start_from ", from, ": ", ec.message()));
  if (folder) {
    auto latest = load_latest_checkpoint(from);
    if (!latest.ok()) return latest.status();
    if (!latest->has_value())
      return absl::NotFoundError(str_cat("warm_start_from ", from, ": no checkpoint there"));
    ckpt = **latest;
  } else {
    ckpt = load_checkpoint(from);
  }
  if (!ckpt.ok()) return ckpt.status();
  int taken = 0;
  for (auto& [name, value] : *variables) {
    if (internal::optimizer_state(name)) continue;
    auto it = ckpt->variables.find(name);
    if (it == ckpt->variables.end() || it->second.shape != value.shape ||
        it->second.dtype != value.dtype) {
      continue;
    }
    value = it->second;
    ++taken;
  }
  log(str_cat("warm-started ", taken, " variables from ", ckpt->path));
  return absl::OkStatus();
}

Params TPUEstimator::input_params(int64_t per_shard_batch) const {
  Params params = params_;
  params.batch_size = per_shard_batch;
  params.profile = std::make_shared<data::StageProfile>();
  return params;
}

std::unique_ptr<runtime::StallWatch> TPUEstimator::stall_watch() const {
  return runtime::StallWatch::after_seconds(sim_.input_stall_report_seconds,
                                            [this](const std::string& line) { log(line); });
}

void TPUEstimator::log(const std::string& line) const {
  if (sim_.log) {
    sim_.log(line);
  } else {
    std::cerr << line << "\n";
  }
}

}  // namespace tpusim::estimator
