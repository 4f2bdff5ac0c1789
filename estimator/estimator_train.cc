#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "common/host_budget.h"
#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/estimator_internal.h"
#include "estimator/summary_writer.h"
#include "estimator/train_loop.h"
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
using internal::TrainLoop;
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

// Replica folding (SimulatorOptions::fold_replicas): how many of the `pipelines` input pipelines
// run (those of the first of the hosts they are spread over) and how many of the `shards` replicas
// they feed are simulated. Unfolded, or with one host, all of them.
absl::StatusOr<std::pair<uint32_t, uint32_t>> fold(const SimulatorOptions& sim, uint32_t shards,
                                                   uint32_t pipelines, uint32_t hosts) {
  if (!sim.fold_replicas) return std::pair{pipelines, shards};
  if (!sim.timing_only) {
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

// How the replicas are fed: `pipelines` input pipelines for `shards` replicas, of which the first
// `fed` run and the first `simulated` replicas are simulated (all of them unless folded).
struct Feeding {
  uint32_t pipelines = 0, fed = 0, simulated = 0;
};

absl::StatusOr<Feeding> feeding(const RunConfig& config, const SimulatorOptions& sim,
                                const internal::HostSide& host, uint32_t shards) {
  Feeding f;
  const bool per_host = config.tpu_config.per_host_input_for_training;
  f.pipelines = per_host ? std::min(host.hosts, shards) : shards;
  if (shards % f.pipelines != 0) {
    return absl::InvalidArgumentError(str_cat(shards, " replicas do not split evenly over ",
                                              f.pipelines, " hosts' input pipelines"));
  }
  auto folded = fold(sim, shards, f.pipelines, host.hosts);
  if (!folded.ok()) return folded.status();
  std::tie(f.fed, f.simulated) = *folded;
  return f;
}

// input_fn once per host (per replica without per-host input), at the per-shard batch size;
// folded, only for the first host's pipelines. The first pipeline's first batch is peeked, its
// wait watched by `watch` (null: not watched). The datasets input_fn builds count a loop of
// `loop_steps` steps of the simulated replicas' batches in their first element's memory check
// (consumer_hold.h), as check_loop_feeds counts them once the batch's shapes are known.
absl::StatusOr<Input> open_input(const InputFn& input_fn, const Params& user,
                                 int64_t per_shard_batch, const Feeding& feeding,
                                 int64_t loop_steps, runtime::StallWatch* watch) {
  const data::ScopedConsumerHold hold(
      {saturating_product(static_cast<uint64_t>(loop_steps), feeding.simulated),
       str_cat("a loop of ", loop_steps, " steps (tpu_config.iterations_per_loop) of ",
               feeding.simulated, " replicas' feeds")});
  Input input;
  for (uint32_t p = 0; p < feeding.fed; ++p) {
    Params params = user;
    params.batch_size = per_shard_batch;
    params.shard_index = p;
    params.num_shards = feeding.pipelines;
    params.profile = std::make_shared<data::StageProfile>();
    auto ds = internal::call_input_fn(input_fn, params);
    if (!ds.ok()) return ds.status();
    if (*ds == nullptr) return absl::InvalidArgumentError("input_fn returned no dataset");
    data::DatasetPtr dataset = *ds;
    if (p == 0) {
      auto it = dataset->make_iterator();
      auto first = runtime::next_watched(*it, watch, "input pipeline 0", "first batch",
                                         params.profile.get());
      if (!first.ok()) return first.status();
      if (!first->has_value()) return absl::OutOfRangeError("the train input is empty");
      input.first = **first;
      dataset = peeked(**first, std::move(it));
    }
    input.pipelines.push_back({dataset, params.profile});
  }
  return input;
}

// The step into `b`: infeeds shaped like one per-shard batch (`first`), model_fn in train mode,
// CrossShardOptimizer; outputs the loss, the learning rate and the host_call tensors. Returns
// model_fn's spec.
absl::StatusOr<TPUEstimatorSpec> build_train_step(runtime::GraphBuilder& b, const ModelFn& model_fn,
                                                  const Params& user, const data::Element& first,
                                                  const std::set<std::string>& bf16_infeeds,
                                                  int64_t per_shard_batch, uint32_t shards) {
  Features features;
  std::optional<Value> labels;
  if (auto s = build_infeeds(b, first, bf16_infeeds, &features, &labels); !s.ok()) return s;
  Params model_params = user;
  model_params.batch_size = per_shard_batch;
  model_params.num_shards = shards;
  auto spec = model_fn(b, features, labels, Mode::kTrain, model_params);
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
  return spec;
}

// The spec's init_fn on the fresh variables, which must keep their layout.
absl::Status run_init_fn(const TPUEstimatorSpec& spec, runtime::Variables* variables) {
  const Layout before = layout_of(*variables);
  if (auto s = spec.init_fn(variables); !s.ok())
    return absl::Status(s.code(), str_cat("model_fn's init_fn: ", s.message()));
  return check_init_fn_kept(before, *variables);
}

// Warm-starts variables from create()'s warm_start_from (empty: not asked for).
using WarmStart = std::function<absl::Status(runtime::Variables* variables)>;

// The variables the first step of the run trains from. A timing-only run computes no values: its
// variables are the graph's shapes, and a checkpoint it restores is checked against them; nothing
// is initialised, warm-started or given to init_fn. Otherwise the graph's initial values, then the
// checkpoint's when `restored`, else warm-started when asked, then changed by the spec's init_fn
// if it has one.
absl::StatusOr<runtime::Variables> starting_variables(const runtime::Graph& graph, bool timing_only,
                                                      const std::optional<Checkpoint>& restored,
                                                      const TPUEstimatorSpec& spec,
                                                      const WarmStart& warm_start) {
  runtime::Variables variables =
      timing_only ? runtime::variable_shapes(graph) : runtime::initial_variables(graph);
  if (restored.has_value()) {
    if (auto s = restore(*restored, &variables); !s.ok()) return s;
    return variables;
  }
  if (timing_only) return variables;
  if (warm_start) {
    if (auto s = warm_start(&variables); !s.ok()) return s;
  }
  if (spec.init_fn) {
    if (auto s = run_init_fn(spec, &variables); !s.ok()) return s;
  }
  return variables;
}

// The step compiled for `shards` replicas, the first `simulated` of them simulated.
absl::StatusOr<std::unique_ptr<runtime::Executable>> compile_step(runtime::Backend& backend,
                                                                  const runtime::Graph& graph,
                                                                  runtime::CompileOptions options,
                                                                  uint32_t shards,
                                                                  uint32_t simulated) {
  options.replicas = shards;
  options.simulated_replicas = simulated;
  return backend.compile(graph, options);
}

// A loop's feeds (`loop_steps`: iterations_per_loop steps, or the steps left) held against the
// host's memory budget before the step is compiled or the loop's input pulled.
absl::Status check_loop_feeds(const runtime::Graph& graph, uint32_t simulated, int64_t loop_steps) {
  return runtime::check_loop_memory(graph, simulated, static_cast<uint64_t>(loop_steps),
                                    "tpu_config.iterations_per_loop");
}

// The infeed driver over the pipelines, fast-forwarded to `start_step`.
absl::StatusOr<std::unique_ptr<runtime::InfeedDriver>> make_driver(
    const runtime::Graph& graph, Input& input, const SimulatorOptions& sim,
    const internal::HostSide& host, int64_t per_shard_batch, uint32_t shards, uint32_t simulated,
    int64_t start_step, std::function<void(const std::string&)> log) {
  runtime::InfeedOptions infeed;
  infeed.replicas = simulated;
  infeed.deal_per_core_batches = true;
  infeed.timing = internal::infeed_timing(sim, host, per_shard_batch);
  infeed.stall_report_seconds = sim.input_stall_report_seconds;
  infeed.log = std::move(log);
  if (simulated < shards) infeed.timing.hosts = 1;  // the first host's pipelines only
  auto driver = runtime::InfeedDriver::create(graph, std::move(input.pipelines), infeed);
  if (!driver.ok()) return driver.status();
  if (auto s = (*driver)->skip(static_cast<uint64_t>(start_step)); !s.ok()) {
    return absl::Status(s.code(), str_cat("fast-forwarding the input to global step ", start_step,
                                          ": ", s.message()));
  }
  return driver;
}

// The run's trace (SimulatorOptions::trace_path; none when empty) and profile, telling
// config.progress of each step as the device finishes it.
absl::StatusOr<std::unique_ptr<TrainTrace>> start_trace(const SimulatorOptions& sim,
                                                        runtime::InfeedDriver& driver,
                                                        int64_t max_steps,
                                                        TraceRequest::Profile profile) {
  std::function<void(int64_t)> on_step;
  if (sim.progress) {
    on_step = [&sim, max_steps](int64_t g) { sim.progress(g, max_steps); };
  }
  TraceRequest request;
  request.path = sim.trace_path;
  request.first_step = sim.trace_first_step;
  request.last_step = sim.trace_last_step;
  request.counter_window = sim.trace_counter_window_ns * 1000;
  request.profile = std::move(profile);
  return TrainTrace::start(request, driver, on_step);
}

}  // namespace

absl::StatusOr<TrainResult> TPUEstimator::train(const InputFn& input_fn, int64_t max_steps) {
  const auto host_start = std::chrono::steady_clock::now();
  if (train_batch_size_ == 0)
    return absl::InvalidArgumentError("train: the estimator has no train_batch_size");
  const uint32_t shards = config_.tpu_config.num_shards;
  if (auto s = check_writable_dir(config_.model_dir); !s.ok()) return s;
  auto restored = load_latest_checkpoint(config_.model_dir);
  if (!restored.ok()) return restored.status();
  const int64_t start_step = restored->has_value() ? (*restored)->global_step : 0;
  TrainResult result;
  result.global_step = start_step;
  result.values_computed = !sim_.timing_only;
  if (start_step >= max_steps) {
    log(str_cat("global step ", start_step, " already reaches max_steps ", max_steps,
                "; nothing to train"));
    if (restored->has_value())
      result.weights_fingerprint = weights_fingerprint((*restored)->variables);
    return result;
  }

  auto host = internal::host_side(sim_);
  if (!host.ok()) return host.status();
  auto fed = feeding(config_, sim_, *host, shards);
  if (!fed.ok()) return fed.status();
  const uint32_t simulated = fed->simulated;
  if (simulated < shards) {
    log(str_cat("replica folding: replicas 0..", simulated - 1, " (the first host's) simulated, ",
                shards - simulated, " only join the collectives"));
  }
  const int64_t per_shard = train_batch_size_ / shards;
  const int64_t loop_steps =
      std::min<int64_t>(config_.tpu_config.iterations_per_loop, max_steps - start_step);
  auto input = open_input(input_fn, params_, per_shard, *fed, loop_steps, stall_watch().get());
  if (!input.ok()) return input.status();

  runtime::GraphBuilder b;
  auto spec =
      build_train_step(b, model_fn_, params_, input->first, sim_.bf16_infeeds, per_shard, shards);
  if (!spec.ok()) return spec.status();
  if (auto s = check_loop_feeds(b.graph(), simulated, loop_steps); !s.ok()) return s;
  auto exe = compile_step(*backend_, b.graph(), sim_.compile, shards, simulated);
  if (!exe.ok()) return exe.status();

  WarmStart warm;
  if (!warm_start_from_.empty())
    warm = [this](runtime::Variables* v) { return warm_start(warm_start_from_, v); };
  auto variables = starting_variables(b.graph(), sim_.timing_only, *restored, *spec, warm);
  if (!variables.ok()) return variables.status();
  if (restored->has_value())
    log(str_cat("restored ", (*restored)->path, " at global step ", start_step));

  auto driver = make_driver(b.graph(), *input, sim_, *host, per_shard, shards, simulated,
                            start_step, [this](const std::string& line) { log(line); });
  if (!driver.ok()) return driver.status();
  auto summaries = SummaryWriter::create(config_.model_dir);
  if (!summaries.ok()) return summaries.status();
  auto trace = start_trace(sim_, **driver, max_steps,
                           internal::profile_request(sim_, config_, *host, shards, fed->pipelines,
                                                     start_step + 1, "train_step"));
  if (!trace.ok()) return trace.status();
  backend_->keep_op_spans((*trace)->profiling());

  TrainLoop::Settings settings{config_,
                               sim_,
                               host->loop_overhead_s,
                               [this](const std::string& line) { log(line); },
                               host_start,
                               start_step,
                               max_steps};
  TrainLoop loop(*backend_, std::move(settings),
                 {*std::move(exe), *std::move(variables), *std::move(spec), *std::move(driver),
                  *std::move(trace), *std::move(summaries)});
  const absl::Status ran = loop.run(&result);
  backend_->keep_op_spans(false);  // for this run only: a later evaluate or predict asks anew
  if (!ran.ok()) return ran;
  return result;
}

}  // namespace tpusim::estimator
