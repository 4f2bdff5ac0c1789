#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <tuple>

#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/estimator_internal.h"
#include "estimator/summary_writer.h"
#include "estimator/train_trace.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/initializers.h"
#include "runtime/infeed/infeed_driver.h"

// TPUEstimator::train (estimator.h).
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

struct Input {
  std::vector<runtime::InputPipeline> pipelines;
  data::Element first;  // pipeline 0's first batch
};

// Each variable's dtype, shape and payload sizes: what init_fn may not change.
using Layout = std::map<std::string, std::tuple<DType, runtime::Shape, size_t, size_t>>;

Layout layout_of(const runtime::Variables& variables) {
  Layout layout;
  for (const auto& [name, v] : variables) layout[name] = {v.dtype, v.shape, v.f.size(), v.i.size()};
  return layout;
}

// init_fn changes values, not the variables: a variable added, dropped or reshaped is an error
// naming it (the compiled step expects the graph's layout).
absl::Status check_init_fn_kept(const Layout& before, const runtime::Variables& after) {
  const Layout now = layout_of(after);
  for (const auto& [name, was] : before) {
    auto it = now.find(name);
    if (it == now.end())
      return absl::InvalidArgumentError(
          str_cat("model_fn's init_fn removed variable '", name, "'"));
    if (it->second != was) {
      return absl::InvalidArgumentError(
          str_cat("model_fn's init_fn changed variable '", name, "' from ",
                  runtime::dtype_name(std::get<0>(was)), std::get<1>(was).str(), " (",
                  std::get<2>(was) + std::get<3>(was), " values) to ",
                  runtime::dtype_name(std::get<0>(it->second)), std::get<1>(it->second).str(), " (",
                  std::get<2>(it->second) + std::get<3>(it->second), " values)"));
    }
  }
  for (const auto& [name, unused] : now) {
    if (before.count(name) == 0)
      return absl::InvalidArgumentError(
          str_cat("model_fn's init_fn added variable '", name, "', which the model does not have"));
  }
  return absl::OkStatus();
}

// Replica folding (RunConfig::fold_replicas): how many of the `pipelines` input pipelines run
// (those of the first of the hosts they are spread over) and how many of the `shards` replicas
// they feed are simulated. Unfolded, or with one host, all of them.
absl::StatusOr<std::pair<uint32_t, uint32_t>> fold(const RunConfig& config, uint32_t shards,
                                                   uint32_t pipelines, uint32_t hosts) {
  if (!config.fold_replicas) return std::pair{pipelines, shards};
  if (!config.timing_only) {
    return absl::InvalidArgumentError(
        "fold_replicas runs timing-only (timing_only): the folded replicas compute no values");
  }
  const uint32_t hosts_used = std::min(hosts, pipelines);
  if (pipelines % hosts_used != 0) {
    return absl::InvalidArgumentError(str_cat("fold_replicas: ", pipelines,
                                              " input pipelines do not split evenly over ",
                                              hosts_used, " hosts"));
  }
  const uint32_t first_host = pipelines / hosts_used;
  return std::pair{first_host, first_host * (shards / pipelines)};
}

}  // namespace

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

  auto host_or = internal::host_side(config_);
  if (!host_or.ok()) return host_or.status();
  const internal::HostSide& host = *host_or;
  const bool per_host = config_.tpu_config.per_host_input_for_training;
  const uint32_t pipelines = per_host ? std::min(host.hosts, shards) : shards;
  if (shards % pipelines != 0) {
    return absl::InvalidArgumentError(str_cat(shards, " replicas do not split evenly over ",
                                              pipelines, " hosts' input pipelines"));
  }

  auto folded = fold(config_, shards, pipelines, host.hosts);
  if (!folded.ok()) return folded.status();
  const auto [fed_pipelines, simulated] = *folded;
  if (simulated < shards) {
    log(str_cat("replica folding: replicas 0..", simulated - 1, " (the first host's) simulated, ",
                shards - simulated, " only join the collectives"));
  }

  // input_fn once per host (per replica without per-host input), at the per-shard batch size;
  // folded, only for the first host's pipelines.
  Input input;
  for (uint32_t p = 0; p < fed_pipelines; ++p) {
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
      dataset = peeked(**first, std::move(it));
    }
    input.pipelines.push_back({dataset, params.profile});
  }

  // The step: infeeds shaped like one per-shard batch, model_fn, CrossShardOptimizer.
  runtime::GraphBuilder b;
  Features features;
  std::optional<Value> labels;
  if (auto s = build_infeeds(b, input.first, config_.bf16_infeeds, &features, &labels); !s.ok())
    return s;
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

  runtime::CompileOptions options = config_.compile;
  options.replicas = shards;
  options.simulated_replicas = simulated;
  auto exe = backend_->compile(b.graph(), options);
  if (!exe.ok()) return exe.status();

  runtime::Variables variables = runtime::initial_variables(b.graph());
  if (restored->has_value()) {
    if (auto s = restore(**restored, &variables); !s.ok()) return s;
    log(str_cat("restored ", (*restored)->path, " at global step ", start_step));
  } else {
    if (!config_.warm_start_from.empty()) {
      if (auto s = warm_start(config_.warm_start_from, &variables); !s.ok()) return s;
    }
    if (spec->init_fn) {
      const Layout before = layout_of(variables);
      if (auto s = spec->init_fn(&variables); !s.ok())
        return absl::Status(s.code(), str_cat("model_fn's init_fn: ", s.message()));
      if (auto s = check_init_fn_kept(before, variables); !s.ok()) return s;
    }
  }

  runtime::InfeedOptions infeed;
  infeed.replicas = simulated;
  infeed.deal_per_core_batches = true;
  infeed.timing = internal::infeed_timing(config_, host, train_batch_size_ / shards);
  if (simulated < shards) infeed.timing.hosts = 1;  // the first host's pipelines only
  auto driver = runtime::InfeedDriver::create(b.graph(), std::move(input.pipelines), infeed);
  if (!driver.ok()) return driver.status();
  if (auto s = (*driver)->skip(static_cast<uint64_t>(start_step)); !s.ok()) {
    return absl::Status(s.code(), str_cat("fast-forwarding the input to global step ", start_step,
                                          ": ", s.message()));
  }
  auto summaries = SummaryWriter::create(config_.model_dir);
  if (!summaries.ok()) return summaries.status();
  std::function<void(int64_t)> on_step;
  if (config_.progress) {
    on_step = [this, max_steps](int64_t g) { config_.progress(g, max_steps); };
  }
  auto trace = TrainTrace::start({config_.trace_path, config_.trace_first_step,
                                  config_.trace_last_step, config_.trace_counter_window_ns * 1000},
                                 **driver, on_step);
  if (!trace.ok()) return trace.status();

  int64_t step = start_step;
  double host_clock = 0;  // simulated time since the input pipeline started
  double device_seconds = 0, wait_seconds = 0, mxu_weighted = 0;
  double last_log_host = 0;
  int64_t last_log_step = start_step;
  const uint32_t ipl = config_.tpu_config.iterations_per_loop;
  while (step < max_steps) {
    const auto n = static_cast<uint32_t>(std::min<int64_t>(ipl, max_steps - step));
    auto steps = (*driver)->next_loop(n, backend_->device_now_seconds());
    if (!steps.ok()) return steps.status();
    const auto loop_start = std::chrono::steady_clock::now();
    (*trace)->before_loop(step + 1, step + n);
    auto loop = backend_->run_loop(**exe, variables, *steps, static_cast<uint64_t>(step));
    if (!loop.ok()) return loop.status();
    if (auto s = backend_->host_round_trip(host.loop_overhead_s); !s.ok()) return s;
    (*trace)->after_loop(**driver);
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
    runtime::add_op_timings(t.ops, &result.ops);
    result.roofs = t.roofs;
    mxu_weighted += mxu * loop_device;
    host_clock += loop_device + host.loop_overhead_s;
    const int64_t before = step;
    step += n;
    if (config_.progress) config_.progress(step, max_steps);
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
  for (runtime::OpTiming& o : result.ops) {
    const auto steps_run = static_cast<double>(result.steps_run);
    o.flops /= steps_run;
    o.mxu_flops /= steps_run;
    o.hbm_bytes /= steps_run;
    o.ici_bytes /= steps_run;
    o.seconds /= steps_run;
    o.instructions /= static_cast<uint64_t>(result.steps_run);
  }
  result.weights_fingerprint = weights_fingerprint(variables);
  auto analysis = (*trace)->finish();
  if (!analysis.ok()) return analysis.status();
  result.analysis = *std::move(analysis);
  result.trace_bytes = (*trace)->file_bytes();
  return result;
}

}  // namespace tpusim::estimator
