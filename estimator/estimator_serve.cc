#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/estimator_internal.h"
#include "estimator/summary_writer.h"
#include "estimator/train_trace.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/initializers.h"
#include "runtime/infeed/infeed_driver.h"

// TPUEstimator::evaluate, predict and export_saved_model (estimator.h).
namespace tpusim::estimator {
namespace {

using internal::build_infeeds;
using internal::peeked;
using internal::restore;
using internal::stack;
using internal::trained;
using runtime::DType;
using runtime::Value;
namespace data = runtime::data;

// The whole predict input, each batch `per_shard` rows with a "mask" (all ones where the input
// gave none). It must end within `max_batches` batches. Each read's wait is watched by `watch`
// (null: not watched).
absl::StatusOr<std::vector<data::Element>> read_predict_batches(const data::Dataset& ds,
                                                                int64_t per_shard,
                                                                size_t max_batches,
                                                                runtime::StallWatch* watch) {
  std::vector<data::Element> batches;
  auto it = ds.make_iterator();
  for (;;) {
    auto next = runtime::next_watched(*it, watch, "predict input",
                                      str_cat("batch ", batches.size()), nullptr);
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
      data::FeatureValue mask;
      mask.shape = {per_shard};
      mask.floats.assign(static_cast<size_t>(per_shard), 1.0f);
      e["mask"] = mask;
    }
    batches.push_back(std::move(e));
  }
  return batches;
}

// Whole steps: padding batches (all mask 0) for the replicas the last step has no batch for.
void pad_to_whole_steps(uint32_t shards, std::vector<data::Element>* batches) {
  while (batches->size() % shards != 0) {
    data::Element pad = batches->front();
    for (auto& [name, v] : pad) {
      std::fill(v.floats.begin(), v.floats.end(), 0.0f);
      std::fill(v.ints.begin(), v.ints.end(), 0);
    }
    batches->push_back(std::move(pad));
  }
}

// Row `row` of each prediction output ("prediction/NAME") of one replica's step.
std::map<std::string, runtime::HostTensor> row_prediction(
    const std::map<std::string, Value>& predictions, const runtime::Outputs& outputs, int64_t row) {
  std::map<std::string, runtime::HostTensor> p;
  for (const auto& [name, v] : predictions) {
    const runtime::HostTensor& t = outputs.at("prediction/" + name);
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
  return p;
}

// The eval loop's metrics: metric_fn on each metric tensor stacked over the loop's steps and
// replicas, and the loss averaged over the `batches` (steps x replicas) that ran.
absl::StatusOr<std::map<std::string, double>> eval_metrics(
    const TPUEstimatorSpec& spec, const std::vector<std::vector<runtime::Outputs>>& outputs,
    int64_t batches) {
  std::map<std::string, std::vector<const runtime::HostTensor*>> parts;
  double loss = 0;
  for (const auto& step : outputs) {
    for (const auto& replica : step) {
      loss += replica.at("loss").f[0];
      for (const auto& [name, v] : spec.metric_tensors)
        parts[name].push_back(&replica.at("metric/" + name));
    }
  }
  std::map<std::string, double> results;
  if (spec.metric_fn) {
    std::map<std::string, runtime::HostTensor> tensors;
    for (const auto& [name, list] : parts) tensors[name] = stack(list);
    auto metrics = spec.metric_fn(tensors);
    if (!metrics.ok()) return metrics.status();
    results = *metrics;
  }
  results["loss"] = loss / static_cast<double>(batches);
  return results;
}

}  // namespace

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
  if (auto s = build_infeeds(b, first, sim_.bf16_infeeds, &features, &labels); !s.ok()) return s;
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
  runtime::CompileOptions options = sim_.compile;
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
  auto result = evaluate_with_analysis(input_fn, steps);
  if (!result.ok()) return result.status();
  return std::move(result->metrics);
}

absl::StatusOr<EvalResult> TPUEstimator::evaluate_with_analysis(const InputFn& input_fn,
                                                                int64_t steps) {
  if (eval_batch_size_ == 0) {
    return absl::InvalidArgumentError(
        "evaluate: eval_batch_size is 0; TPUEstimator needs eval_batch_size to evaluate");
  }
  if (steps < 1) return absl::InvalidArgumentError(str_cat("evaluate: steps ", steps, " < 1"));
  const uint32_t shards = config_.tpu_config.num_shards;
  const int64_t per_shard = eval_batch_size_ / shards;
  const Params params = input_params(per_shard);
  auto ds = internal::call_input_fn(input_fn, params);
  if (!ds.ok()) return ds.status();
  auto it = (*ds)->make_iterator();
  auto first = runtime::next_watched(*it, stall_watch().get(), "eval input", "first batch",
                                     params.profile.get());
  if (!first.ok()) return first.status();
  if (!first->has_value()) return absl::OutOfRangeError("the eval input is empty");
  auto compiled = compile_for(Mode::kEval, **first, per_shard);
  if (!compiled.ok()) return compiled.status();
  const runtime::Graph& g = compiled->builder->graph();

  runtime::InfeedOptions infeed;
  infeed.replicas = shards;
  infeed.deal_per_core_batches = true;
  auto host = internal::host_side(sim_);
  if (!host.ok()) return host.status();
  infeed.timing = internal::infeed_timing(sim_, *host, per_shard);
  infeed.stall_report_seconds = sim_.input_stall_report_seconds;
  infeed.log = [this](const std::string& line) { log(line); };
  auto driver =
      runtime::InfeedDriver::create(g, {{peeked(**first, std::move(it)), params.profile}}, infeed);
  if (!driver.ok()) return driver.status();
  // The loop's steps are numbered on from the checkpoint's, as the backend numbers them.
  const int64_t first_step = compiled->global_step + 1;
  TraceRequest request;
  request.profile = internal::profile_request(sim_, config_, *host, shards, /*pipelines=*/1,
                                              first_step, "eval_step");
  auto trace = TrainTrace::start(request, **driver);
  if (!trace.ok()) return trace.status();
  backend_->keep_op_spans((*trace)->profiling());
  (*trace)->before_loop(first_step, first_step + steps - 1);
  auto loop_steps =
      (*driver)->next_loop(static_cast<uint32_t>(steps), backend_->device_now_seconds());
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
  backend_->keep_op_spans(false);  // for this run only: a later predict does not pay for them
  if (!loop.ok()) return loop.status();
  (*trace)->after_loop(**driver, loop->timing);
  EvalResult result;
  auto analysis = (*trace)->finish();
  if (!analysis.ok()) return analysis.status();
  result.analysis = *std::move(analysis);
  result.profile_path = (*trace)->profile_path();

  auto metrics = eval_metrics(compiled->spec, loop->outputs, steps * shards);
  if (!metrics.ok()) return metrics.status();
  std::map<std::string, double> results = *std::move(metrics);
  results["global_step"] = static_cast<double>(compiled->global_step);
  auto summaries = SummaryWriter::create(config_.model_dir + "/eval");
  if (!summaries.ok()) return summaries.status();
  for (const auto& [name, value] : results) {
    if (name == "global_step") continue;
    if (auto s = (*summaries)->add_scalar(name, value, compiled->global_step); !s.ok()) return s;
  }
  log(str_cat("evaluation at global step ", compiled->global_step, ": ", str_join(results, ", ")));
  result.metrics = std::move(results);
  return result;
}

absl::StatusOr<std::vector<TPUEstimator::Prediction>> TPUEstimator::predict(
    const InputFn& input_fn) {
  if (predict_batch_size_ == 0) {
    return absl::InvalidArgumentError(
        "predict: predict_batch_size is 0; TPUEstimator needs predict_batch_size to predict");
  }
  const uint32_t shards = config_.tpu_config.num_shards;
  const int64_t per_shard = predict_batch_size_ / shards;
  auto ds = internal::call_input_fn(input_fn, input_params(per_shard));
  if (!ds.ok()) return ds.status();
  auto read = read_predict_batches(**ds, per_shard, sim_.max_predict_batches, stall_watch().get());
  if (!read.ok()) return read.status();
  std::vector<data::Element> batches = *std::move(read);
  if (batches.empty()) return std::vector<Prediction>{};
  pad_to_whole_steps(shards, &batches);
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
    auto steps = (*driver)->next_loop(n, backend_->device_now_seconds());
    if (!steps.ok()) return steps.status();
    auto loop = backend_->run_loop(*compiled->exe, compiled->variables, *steps,
                                   static_cast<uint64_t>(compiled->global_step));
    if (!loop.ok()) return loop.status();
    for (size_t s = 0; s < loop->outputs.size(); ++s) {
      for (uint32_t r = 0; r < shards; ++r) {
        const std::vector<float>& mask = masks[(done + s) * shards + r];
        for (int64_t row = 0; row < per_shard; ++row) {
          if (mask[static_cast<size_t>(row)] == 0) continue;
          out.push_back(row_prediction(compiled->spec.predictions, loop->outputs[s][r], row));
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
