#include "estimator/estimator.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/checkpoint.h"
#include "estimator/summary_writer.h"
#include "runtime/backend/tpusim/tpusim_backend.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/initializers.h"
#include "runtime/infeed/infeed_driver.h"

namespace tpusim::estimator {
namespace {

using runtime::DType;
using runtime::Value;
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

struct Input {
  std::vector<runtime::InputPipeline> pipelines;
  data::Element first;  // pipeline 0's first batch
};

// The host side of the slice the backend simulates (or of this machine, for cpu).
struct HostSide {
  uint32_t hosts = 1;
  uint32_t cpu_cores = 1;
  double loop_overhead_s = 0;
};

bool trained(const std::string& variable) {
  // Batch-norm statistics are updated by the model, not by gradients.
  return variable.find("moving_") == std::string::npos && variable != "global_step";
}

// Infeeds shaped like one per-shard batch: "label" is the labels, the rest the features (and
// "mask", a predict batch's padding marker, neither).
absl::Status build_infeeds(runtime::GraphBuilder& b, const data::Element& first, Features* features,
                           std::optional<Value>* labels) {
  for (const auto& [name, value] : first) {
    if (name == "mask") continue;
    if (value.type == data::FeatureType::kBytes) {
      return absl::InvalidArgumentError(
          str_cat("input component '", name, "' holds bytes; decode it in input_fn"));
    }
    const DType dtype = value.type == data::FeatureType::kInt64 ? DType::kS32 : DType::kF32;
    const Value v = b.infeed(name, dtype, runtime::Shape(value.shape));
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

}  // namespace

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

TPUEstimator::TPUEstimator(ModelFn model_fn, RunConfig config, Params params,
                           int64_t train_batch_size, int64_t eval_batch_size,
                           int64_t predict_batch_size)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      params_(std::move(params)),
      train_batch_size_(train_batch_size),
      eval_batch_size_(eval_batch_size),
      predict_batch_size_(predict_batch_size) {}

TPUEstimator::~TPUEstimator() = default;

absl::StatusOr<std::unique_ptr<TPUEstimator>> TPUEstimator::create(
    ModelFn model_fn, RunConfig config, Params params, bool use_tpu, int64_t train_batch_size,
    int64_t eval_batch_size, int64_t predict_batch_size) {
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
  if (!use_tpu) config.backend = "cpu";
  std::unique_ptr<TPUEstimator> est(new TPUEstimator(std::move(model_fn), std::move(config),
                                                     std::move(params), train_batch_size,
                                                     eval_batch_size, predict_batch_size));
  if (est->config_.backend == "tpusim") {
    est->backend_ = runtime::make_tpusim_backend(est->config_.slice);
  } else {
    auto backend = runtime::make_backend(est->config_.backend);
    if (!backend.ok()) return backend.status();
    est->backend_ = *std::move(backend);
  }
  return est;
}

absl::Status TPUEstimator::warm_start(const std::string& from, runtime::Variables* variables) {
  absl::StatusOr<Checkpoint> ckpt = absl::NotFoundError("");
  if (std::filesystem::is_directory(from)) {
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
    if (optimizer_state(name)) continue;
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

void TPUEstimator::log(const std::string& line) const {
  if (config_.log) {
    config_.log(line);
  } else {
    std::cerr << line << "\n";
  }
}

absl::StatusOr<TrainResult> TPUEstimator::train(const InputFn& input_fn, int64_t max_steps) {
  const auto host_start = std::chrono::steady_clock::now();
  if (train_batch_size_ == 0)
    return absl::InvalidArgumentError("train: the estimator has no train_batch_size");
  const uint32_t shards = config_.tpu_config.num_shards;
  auto restored = load_latest_checkpoint(config_.model_dir);
  if (!restored.ok()) return restored.status();
  const int64_t start_step = restored->has_value() ? (*restored)->global_step : 0;
  TrainResult result;
  result.global_step = start_step;
  if (start_step >= max_steps) {
    log(str_cat("global step ", start_step, " already reaches max_steps ", max_steps,
                "; nothing to train"));
    if (restored->has_value())
      result.weights_fingerprint = weights_fingerprint((*restored)->variables);
    return result;
  }

  // The host side: from the slice's host config, or this machine.
  HostSide host;
  if (config_.backend == "tpusim") {
    auto slice = config::load_slice(config_.slice);
    if (!slice.ok()) return slice.status();
    host.hosts = (*slice)->hosts;
    host.cpu_cores = (*slice)->host.cpu_cores;
    host.loop_overhead_s = (*slice)->host.loop_overhead_s;
  } else {
    host.cpu_cores = std::max(1u, std::thread::hardware_concurrency());
  }
  const bool per_host = config_.tpu_config.per_host_input_for_training;
  const uint32_t pipelines = per_host ? std::min(host.hosts, shards) : shards;
  if (shards % pipelines != 0) {
    return absl::InvalidArgumentError(str_cat(shards, " replicas do not split evenly over ",
                                              pipelines, " hosts' input pipelines"));
  }

  // input_fn once per host (per replica without per-host input), at the per-shard batch size.
  Input input;
  for (uint32_t p = 0; p < pipelines; ++p) {
    Params params = params_;
    params.batch_size = train_batch_size_ / shards;
    params.shard_index = p;
    params.num_shards = pipelines;
    params.profile = std::make_shared<data::StageProfile>();
    auto ds = input_fn(params);
    if (!ds.ok()) return ds.status();
    if (*ds == nullptr) return absl::InvalidArgumentError("input_fn returned no dataset");
    data::DatasetPtr dataset = *ds;
    if (p == 0) {
      auto it = dataset->make_iterator();
      auto first = it->next();
      if (!first.ok()) return first.status();
      if (!first->has_value()) return absl::OutOfRangeError("the train input is empty");
      input.first = **first;
      dataset = std::make_shared<PeekedDataset>(**first, std::move(it));
    }
    input.pipelines.push_back({dataset, params.profile});
  }

  // The step: infeeds shaped like one per-shard batch, model_fn, CrossShardOptimizer.
  runtime::GraphBuilder b;
  Features features;
  std::optional<Value> labels;
  if (auto s = build_infeeds(b, input.first, &features, &labels); !s.ok()) return s;
  Params model_params = params_;
  model_params.batch_size = train_batch_size_ / shards;
  model_params.num_shards = shards;
  auto spec = model_fn_(b, features, labels, Mode::kTrain, model_params);
  if (!spec.ok()) return spec.status();
  if (!b.status().ok()) return b.status();
  if (!spec->loss.valid() || spec->loss.shape().rank() != 0)
    return absl::InvalidArgumentError("model_fn: train mode needs a scalar loss");
  if (!spec->train_op.has_value())
    return absl::InvalidArgumentError("model_fn: train mode needs a train_op (an optimizer)");
  std::vector<Value> vars;
  for (int id : b.graph().variables()) {
    if (trained(b.graph().node(id).attrs.name)) vars.push_back(Value{id, &b});
  }
  auto grads =
      runtime::cross_shard_gradients(b, spec->loss, vars, shards, runtime::ShardReduction::kMean);
  if (!grads.ok()) return grads.status();
  auto lr = runtime::apply_gradients(b, *spec->train_op, vars, *grads);
  if (!lr.ok()) return lr.status();
  b.output("loss", spec->loss);
  b.output("learning_rate", *lr);
  for (const auto& [name, v] : spec->host_call_tensors) b.output("host_call/" + name, v);
  if (!b.status().ok()) return b.status();

  runtime::CompileOptions options;
  options.precision = config_.precision;
  options.replicas = shards;
  auto exe = backend_->compile(b.graph(), options);
  if (!exe.ok()) return exe.status();

  runtime::Variables variables = runtime::initial_variables(b.graph());
  if (restored->has_value()) {
    if (auto s = restore(**restored, &variables); !s.ok()) return s;
    log(str_cat("restored ", (*restored)->path, " at global step ", start_step));
  } else if (!config_.warm_start_from.empty()) {
    if (auto s = warm_start(config_.warm_start_from, &variables); !s.ok()) return s;
  }

  runtime::InfeedOptions infeed;
  infeed.replicas = shards;
  infeed.deal_per_core_batches = true;
  infeed.timing.cpu_cores = host.cpu_cores;
  infeed.timing.hosts = host.hosts;
  infeed.timing.prefetch_depth = 2;
  auto driver = runtime::InfeedDriver::create(b.graph(), std::move(input.pipelines), infeed);
  if (!driver.ok()) return driver.status();
  if (auto s = (*driver)->skip(static_cast<uint64_t>(start_step)); !s.ok()) {
    return absl::Status(s.code(), str_cat("fast-forwarding the input to global step ", start_step,
                                          ": ", s.message()));
  }
  auto summaries = SummaryWriter::create(config_.model_dir);
  if (!summaries.ok()) return summaries.status();

  int64_t step = start_step;
  double host_clock = 0;  // simulated host time since the input pipeline started
  double device_seconds = 0, wait_seconds = 0, mxu_weighted = 0;
  double last_log_host = 0;
  int64_t last_log_step = start_step;
  const uint32_t ipl = config_.tpu_config.iterations_per_loop;
  while (step < max_steps) {
    const auto n = static_cast<uint32_t>(std::min<int64_t>(ipl, max_steps - step));
    auto steps = (*driver)->next_loop(n, host_clock);
    if (!steps.ok()) return steps.status();
    const auto loop_start = std::chrono::steady_clock::now();
    auto loop = backend_->run_loop(**exe, variables, *steps, static_cast<uint64_t>(step));
    if (!loop.ok()) return loop.status();
    const double loop_host =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
    const runtime::DeviceTiming& t = loop->timing;
    const double loop_device = t.simulated ? t.seconds : loop_host;
    uint64_t most_wait = 0;
    double mxu = 0;
    for (size_t r = 0; r < t.infeed_wait_cycles.size(); ++r) {
      most_wait = std::max(most_wait, t.infeed_wait_cycles[r]);
      mxu += t.mxu_utilization[r] / static_cast<double>(t.mxu_utilization.size());
    }
    const double loop_wait =
        t.simulated && t.cycles > 0 ? loop_device * static_cast<double>(most_wait) / t.cycles : 0;
    device_seconds += loop_device;
    wait_seconds += loop_wait;
    mxu_weighted += mxu * loop_device;
    host_clock += loop_device + host.loop_overhead_s;
    const int64_t before = step;
    step += n;
    for (size_t s = 0; s < loop->outputs.size(); ++s) {
      const auto& outputs = loop->outputs[s];
      result.losses.push_back(outputs[0].at("loss").f[0]);
      if (!spec->host_call_fn) continue;
      std::map<std::string, runtime::HostTensor> tensors;
      for (const auto& [name, v] : spec->host_call_tensors) {
        std::vector<const runtime::HostTensor*> parts;
        for (const auto& replica : outputs) parts.push_back(&replica.at("host_call/" + name));
        tensors[name] = stack(parts);
      }
      if (auto st = spec->host_call_fn(before + static_cast<int64_t>(s) + 1, tensors); !st.ok())
        return st;
    }
    result.final_loss = result.losses.back();
    const float lr_now = loop->outputs.back()[0].at("learning_rate").f[0];
    const double sim_step = (loop_device + host.loop_overhead_s) / n;
    auto crossed = [&](int64_t every) { return every > 0 && step / every > before / every; };
    if (crossed(config_.log_step_count_steps) || step >= max_steps) {
      const double host_now =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
      log(str_cat("global_step ", step, ": loss = ", fmt::format("{:.4f}", result.final_loss), " (",
                  fmt::format("{:.2f}", (step - last_log_step) / (host_now - last_log_host)),
                  " steps/s host, ", fmt::format("{:.3f}", sim_step * 1e3), " ms/step simulated)"));
      last_log_host = host_now;
      last_log_step = step;
    }
    if (crossed(config_.save_summary_steps)) {
      SummaryWriter& w = **summaries;
      for (auto [tag, value] :
           {std::pair{"loss", static_cast<double>(result.final_loss)},
            std::pair{"learning_rate", static_cast<double>(lr_now)},
            std::pair{"global_step/sec", n / loop_host},
            std::pair{"simulated_step_seconds", sim_step},
            std::pair{"infeed_wait_fraction", loop_device > 0 ? loop_wait / loop_device : 0.0},
            std::pair{"mxu_utilization", mxu}}) {
        if (auto s = w.add_scalar(tag, value, step); !s.ok()) return s;
      }
    }
    if (crossed(config_.save_checkpoints_steps) || step >= max_steps) {
      auto saved = save_checkpoint(config_.model_dir, step, variables, config_.keep_checkpoint_max);
      if (!saved.ok()) return saved.status();
      log(str_cat("saved ", *saved));
    }
  }
  result.global_step = step;
  result.steps_run = step - start_step;
  result.host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  result.sim_seconds = host_clock;
  result.sim_seconds_per_step = host_clock / static_cast<double>(result.steps_run);
  result.infeed_wait_fraction = device_seconds > 0 ? wait_seconds / device_seconds : 0;
  result.device_seconds = device_seconds;
  result.input_seconds = wait_seconds;
  result.host_overhead_seconds = host_clock - device_seconds;
  result.mxu_utilization = device_seconds > 0 ? mxu_weighted / device_seconds : 0;
  result.weights_fingerprint = weights_fingerprint(variables);
  return result;
}

struct TPUEstimator::Compiled {
  std::unique_ptr<runtime::GraphBuilder> builder;
  TPUEstimatorSpec spec;
  std::unique_ptr<runtime::Executable> exe;
  runtime::Variables variables;
  int64_t global_step = 0;
};

absl::StatusOr<TPUEstimator::Compiled> TPUEstimator::compile_for(Mode mode,
                                                                 const data::Element& first,
                                                                 int64_t per_shard_batch) {
  Compiled c;
  auto ckpt = load_latest_checkpoint(config_.model_dir);
  if (!ckpt.ok()) return ckpt.status();
  if (!ckpt->has_value()) {
    return absl::NotFoundError(str_cat("no checkpoint in model_dir ", config_.model_dir, " to ",
                                       mode == Mode::kEval ? "evaluate" : "predict with",
                                       "; train first"));
  }
  c.builder = std::make_unique<runtime::GraphBuilder>();
  runtime::GraphBuilder& b = *c.builder;
  Features features;
  std::optional<Value> labels;
  if (auto s = build_infeeds(b, first, &features, &labels); !s.ok()) return s;
  Params params = params_;
  params.batch_size = per_shard_batch;
  params.num_shards = config_.tpu_config.num_shards;
  auto spec = model_fn_(b, features, labels, mode, params);
  if (!spec.ok()) return spec.status();
  if (!b.status().ok()) return b.status();
  c.spec = *spec;
  if (mode == Mode::kEval) {
    if (!c.spec.loss.valid() || c.spec.loss.shape().rank() != 0)
      return absl::InvalidArgumentError("model_fn: eval mode needs a scalar loss");
    b.output("loss", c.spec.loss);
    for (const auto& [name, v] : c.spec.metric_tensors) b.output("metric/" + name, v);
  } else {
    if (c.spec.predictions.empty())
      return absl::InvalidArgumentError("model_fn: predict mode needs predictions");
    for (const auto& [name, v] : c.spec.predictions) {
      if (v.shape().rank() == 0 || v.shape().dim(0) != per_shard_batch) {
        return absl::InvalidArgumentError(str_cat("model_fn: prediction '", name, "' is ",
                                                  v.shape().str(), "; predictions need the batch (",
                                                  per_shard_batch, ") as dimension 0"));
      }
      b.output("prediction/" + name, v);
    }
  }
  if (!b.status().ok()) return b.status();
  runtime::CompileOptions options;
  options.precision = config_.precision;
  options.replicas = config_.tpu_config.num_shards;
  auto exe = backend_->compile(b.graph(), options);
  if (!exe.ok()) return exe.status();
  c.exe = *std::move(exe);
  c.variables = runtime::initial_variables(b.graph());
  if (auto s = restore(**ckpt, &c.variables); !s.ok()) return s;
  c.global_step = (*ckpt)->global_step;
  return c;
}

absl::StatusOr<std::map<std::string, double>> TPUEstimator::evaluate(const InputFn& input_fn,
                                                                     int64_t steps) {
  if (eval_batch_size_ == 0) {
    return absl::InvalidArgumentError(
        "evaluate: eval_batch_size is 0; TPUEstimator needs eval_batch_size to evaluate");
  }
  if (steps < 1) return absl::InvalidArgumentError(str_cat("evaluate: steps ", steps, " < 1"));
  const uint32_t shards = config_.tpu_config.num_shards;
  const int64_t per_shard = eval_batch_size_ / shards;
  auto ds = input_fn(input_params(per_shard));
  if (!ds.ok()) return ds.status();
  auto it = (*ds)->make_iterator();
  auto first = it->next();
  if (!first.ok()) return first.status();
  if (!first->has_value()) return absl::OutOfRangeError("the eval input is empty");
  auto compiled = compile_for(Mode::kEval, **first, per_shard);
  if (!compiled.ok()) return compiled.status();
  const runtime::Graph& g = compiled->builder->graph();

  runtime::InfeedOptions infeed;
  infeed.replicas = shards;
  infeed.deal_per_core_batches = true;
  infeed.timing.stages = {{"input", 1}};
  infeed.timing.stage_seconds = {0};
  auto driver = runtime::InfeedDriver::create(
      g, {{std::make_shared<PeekedDataset>(**first, std::move(it)), nullptr}}, infeed);
  if (!driver.ok()) return driver.status();
  auto loop_steps = (*driver)->next_loop(static_cast<uint32_t>(steps), 0);
  if (!loop_steps.ok()) {
    if (loop_steps.status().code() == absl::StatusCode::kOutOfRange) {
      return absl::OutOfRangeError(str_cat("the eval input ended before ", steps, " steps (",
                                           loop_steps.status().message(),
                                           "); the eval input must not end early"));
    }
    return loop_steps.status();
  }
  auto loop = backend_->run_loop(*compiled->exe, compiled->variables, *loop_steps,
                                 static_cast<uint64_t>(compiled->global_step));
  if (!loop.ok()) return loop.status();

  std::map<std::string, std::vector<const runtime::HostTensor*>> parts;
  double loss = 0;
  for (const auto& step : loop->outputs) {
    for (const auto& replica : step) {
      loss += replica.at("loss").f[0];
      for (const auto& [name, v] : compiled->spec.metric_tensors)
        parts[name].push_back(&replica.at("metric/" + name));
    }
  }
  std::map<std::string, double> results;
  if (compiled->spec.metric_fn) {
    std::map<std::string, runtime::HostTensor> tensors;
    for (const auto& [name, list] : parts) tensors[name] = stack(list);
    auto metrics = compiled->spec.metric_fn(tensors);
    if (!metrics.ok()) return metrics.status();
    results = *metrics;
  }
  results["loss"] = loss / static_cast<double>(steps * shards);
  results["global_step"] = static_cast<double>(compiled->global_step);
  auto summaries = SummaryWriter::create(config_.model_dir + "/eval");
  if (!summaries.ok()) return summaries.status();
  for (const auto& [name, value] : results) {
    if (name == "global_step") continue;
    if (auto s = (*summaries)->add_scalar(name, value, compiled->global_step); !s.ok()) return s;
  }
  log(str_cat("evaluation at global step ", compiled->global_step, ": ", str_join(results, ", ")));
  return results;
}

absl::StatusOr<std::vector<TPUEstimator::Prediction>> TPUEstimator::predict(
    const InputFn& input_fn) {
  const size_t max_batches = config_.max_predict_batches;
  if (predict_batch_size_ == 0) {
    return absl::InvalidArgumentError(
        "predict: predict_batch_size is 0; TPUEstimator needs predict_batch_size to predict");
  }
  const uint32_t shards = config_.tpu_config.num_shards;
  const int64_t per_shard = predict_batch_size_ / shards;
  auto ds = input_fn(input_params(per_shard));
  if (!ds.ok()) return ds.status();
  // The whole input: it must end.
  std::vector<data::Element> batches;
  auto it = (*ds)->make_iterator();
  for (;;) {
    auto next = it->next();
    if (!next.ok()) return next.status();
    if (!next->has_value()) break;
    if (batches.size() == max_batches) {
      return absl::InvalidArgumentError(str_cat("the predict input did not end after ", max_batches,
                                                " batches; it must end (is it repeated?)"));
    }
    data::Element& e = **next;
    for (const auto& [name, v] : e) {
      if (v.shape.empty() || v.shape[0] != per_shard) {
        return absl::InvalidArgumentError(
            str_cat("predict batch ", batches.size(), ": component '", name, "' has ",
                    v.shape.empty() ? 0 : v.shape[0], " rows; the per-shard batch is ", per_shard,
                    " (batch with pad_to_full so the last batch is padded)"));
      }
    }
    if (e.count("mask") == 0) {  // every row real
      data::Value mask;
      mask.shape = {per_shard};
      mask.floats.assign(static_cast<size_t>(per_shard), 1.0f);
      e["mask"] = mask;
    }
    batches.push_back(std::move(e));
  }
  if (batches.empty()) return std::vector<Prediction>{};
  // Whole steps: padding batches (all mask 0) for replicas without one.
  while (batches.size() % shards != 0) {
    data::Element pad = batches.front();
    for (auto& [name, v] : pad) {
      std::fill(v.floats.begin(), v.floats.end(), 0.0f);
      std::fill(v.ints.begin(), v.ints.end(), 0);
    }
    batches.push_back(std::move(pad));
  }
  auto compiled = compile_for(Mode::kPredict, batches.front(), per_shard);
  if (!compiled.ok()) return compiled.status();
  const size_t total_steps = batches.size() / shards;
  std::vector<std::vector<float>> masks;
  for (const auto& e : batches) masks.push_back(e.at("mask").floats);
  runtime::InfeedOptions infeed;
  infeed.replicas = shards;
  infeed.deal_per_core_batches = true;
  infeed.timing.stages = {{"input", 1}};
  infeed.timing.stage_seconds = {0};
  auto driver = runtime::InfeedDriver::create(
      compiled->builder->graph(), {{data::Dataset::from_elements(std::move(batches)), nullptr}},
      infeed);
  if (!driver.ok()) return driver.status();
  std::vector<Prediction> out;
  const uint32_t ipl = config_.tpu_config.iterations_per_loop;
  for (size_t done = 0; done < total_steps;) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(ipl, total_steps - done));
    auto steps = (*driver)->next_loop(n, 0);
    if (!steps.ok()) return steps.status();
    auto loop = backend_->run_loop(*compiled->exe, compiled->variables, *steps,
                                   static_cast<uint64_t>(compiled->global_step));
    if (!loop.ok()) return loop.status();
    for (size_t s = 0; s < loop->outputs.size(); ++s) {
      for (uint32_t r = 0; r < shards; ++r) {
        const std::vector<float>& mask = masks[(done + s) * shards + r];
        const runtime::Outputs& o = loop->outputs[s][r];
        for (int64_t row = 0; row < per_shard; ++row) {
          if (mask[static_cast<size_t>(row)] == 0) continue;
          Prediction p;
          for (const auto& [name, v] : compiled->spec.predictions) {
            const runtime::HostTensor& t = o.at("prediction/" + name);
            std::vector<int64_t> dims(t.shape.dims().begin() + 1, t.shape.dims().end());
            runtime::HostTensor one;
            one.dtype = t.dtype;
            one.shape = runtime::Shape(dims);
            const int64_t width = one.elements();
            if (t.dtype == DType::kS32) {
              one.i.assign(t.i.begin() + row * width, t.i.begin() + (row + 1) * width);
            } else {
              one.f.assign(t.f.begin() + row * width, t.f.begin() + (row + 1) * width);
            }
            p[name] = std::move(one);
          }
          out.push_back(std::move(p));
        }
      }
    }
    done += n;
  }
  return out;
}

absl::Status TPUEstimator::export_saved_model(const std::string& dir,
                                              const std::vector<TensorSpec>& features,
                                              int64_t batch_size) {
  if (batch_size < 1) return absl::InvalidArgumentError("export: batch_size must be >= 1");
  auto ckpt = load_latest_checkpoint(config_.model_dir);
  if (!ckpt.ok()) return ckpt.status();
  if (!ckpt->has_value()) {
    return absl::NotFoundError(
        str_cat("no checkpoint in model_dir ", config_.model_dir, " to export; train first"));
  }
  runtime::GraphBuilder b;
  Features inputs;
  std::vector<TensorSpec> signature;
  for (const TensorSpec& f : features) {
    std::vector<int64_t> dims = f.shape.dims();
    dims.insert(dims.begin(), batch_size);
    inputs[f.name] = b.infeed(f.name, f.dtype, runtime::Shape(dims));
    signature.push_back({f.name, f.dtype, runtime::Shape(dims)});
  }
  Params params = params_;
  params.batch_size = batch_size;
  auto spec = model_fn_(b, inputs, std::nullopt, Mode::kPredict, params);
  if (!spec.ok()) return spec.status();
  if (spec->predictions.empty())
    return absl::InvalidArgumentError("model_fn: predict mode needs predictions");
  std::vector<std::string> names;
  for (const auto& [name, v] : spec->predictions) {
    b.output("prediction/" + name, v);
    names.push_back(name);
  }
  if (!b.status().ok()) return b.status();
  runtime::Variables variables = runtime::initial_variables(b.graph());
  if (auto s = restore(**ckpt, &variables); !s.ok()) return s;
  return write_saved_model(dir, b.graph(), variables, signature, names, batch_size,
                           (*ckpt)->global_step);
}

}  // namespace tpusim::estimator
