#include "estimator/train_loop.h"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "common/fault_point.h"
#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator_internal.h"

namespace tpusim::estimator::internal {
namespace {

LoopFigures loop_figures(const runtime::DeviceTiming& t, double loop_host) {
  LoopFigures f;
  f.host = loop_host;
  f.device = t.simulated ? t.seconds : loop_host;
  uint64_t most_wait = 0;
  for (size_t r = 0; r < t.infeed_wait_cycles.size(); ++r) {
    most_wait = std::max(most_wait, t.infeed_wait_cycles[r]);
    f.mxu += t.mxu_utilization[r] / static_cast<double>(t.mxu_utilization.size());
  }
  f.wait = t.simulated && t.cycles > 0 ? f.device * static_cast<double>(most_wait) / t.cycles : 0;
  return f;
}

// Each step's loss into `result`, and host_call_fn on each step's host_call tensors (stacked over
// the replicas). The loop ran the steps after global step `before`.
absl::Status take_outputs(const TPUEstimatorSpec& spec, const runtime::LoopResult& loop,
                          int64_t before, TrainResult* result) {
  for (size_t s = 0; s < loop.outputs.size(); ++s) {
    const auto& outputs = loop.outputs[s];
    result->losses.push_back(outputs[0].at("loss").f[0]);
    if (!spec.host_call_fn) continue;
    std::map<std::string, runtime::HostTensor> tensors;
    for (const auto& [name, v] : spec.host_call_tensors) {
      std::vector<const runtime::HostTensor*> parts;
      for (const auto& replica : outputs) parts.push_back(&replica.at("host_call/" + name));
      tensors[name] = stack(parts);
    }
    if (auto st = spec.host_call_fn(before + static_cast<int64_t>(s) + 1, tensors); !st.ok())
      return st;
  }
  result->final_loss = result->losses.back();
  return absl::OkStatus();
}

// The loop's scalars for TensorBoard at global step `step`.
absl::Status write_summaries(SummaryWriter& w, int64_t step, uint32_t n, float loss, float lr,
                             const LoopFigures& f, double sim_step, bool values_computed) {
  if (values_computed) {
    if (auto s = w.add_scalar("loss", static_cast<double>(loss), step); !s.ok()) return s;
  }
  for (auto [tag, value] :
       {std::pair{"learning_rate", static_cast<double>(lr)},
        std::pair{"global_step/sec", n / f.host}, std::pair{"simulated_step_seconds", sim_step},
        std::pair{"infeed_wait_fraction", f.device > 0 ? f.wait / f.device : 0.0},
        std::pair{"mxu_utilization", f.mxu}}) {
    if (auto s = w.add_scalar(tag, value, step); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

TrainLoop::TrainLoop(runtime::Backend& backend, Settings settings, Parts parts)
    : backend_(backend),
      settings_(std::move(settings)),
      parts_(std::move(parts)),
      step_(settings_.start_step),
      last_log_step_(settings_.start_step) {}

absl::StatusOr<runtime::LoopResult> TrainLoop::run_device_loop(uint32_t n, LoopFigures* figures) {
  auto steps = parts_.driver->next_loop(n, backend_.device_now_seconds());
  if (!steps.ok()) return steps.status();
  const auto loop_start = std::chrono::steady_clock::now();
  parts_.trace->before_loop(step_ + 1, step_ + n);
  auto loop =
      backend_.run_loop(*parts_.exe, parts_.variables, *steps, static_cast<uint64_t>(step_));
  if (!loop.ok()) return loop.status();
  if (auto s = backend_.host_round_trip(settings_.loop_overhead_s); !s.ok()) return s;
  parts_.trace->after_loop(*parts_.driver, loop->timing);
  const double loop_host =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  *figures = loop_figures(loop->timing, loop_host);
  return loop;
}

void TrainLoop::log_progress(float loss, double sim_step) {
  const double host_now =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - settings_.host_start)
          .count();
  // A timing-only run computed no loss: say so rather than print the zeros it holds.
  const std::string figure = settings_.sim.timing_only ? std::string(": no loss (timing-only)")
                                                       : ": loss = " + fmt::format("{:.4f}", loss);
  settings_.log(
      str_cat("global_step ", step_, figure, " (",
              fmt::format("{:.2f}", (step_ - last_log_step_) / (host_now - last_log_host_)),
              " steps/s host, ", fmt::format("{:.3f}", sim_step * 1e3), " ms/step simulated)"));
  last_log_host_ = host_now;
  last_log_step_ = step_;
}

absl::Status TrainLoop::train_one_loop(TrainResult* result) {
  const RunConfig& config = settings_.config;
  const auto n = static_cast<uint32_t>(
      std::min<int64_t>(config.tpu_config.iterations_per_loop, settings_.max_steps - step_));
  LoopFigures f;
  auto loop = run_device_loop(n, &f);
  if (!loop.ok()) return loop.status();
  device_seconds_ += f.device;
  wait_seconds_ += f.wait;
  runtime::add_op_timings(loop->timing.ops, &result->ops);
  result->roofs = loop->timing.roofs;
  result->hbm_floor = loop->timing.hbm_floor;
  mxu_weighted_ += f.mxu * f.device;
  host_clock_ += f.device + settings_.loop_overhead_s;
  const int64_t before = step_;
  step_ += n;
  fault_point("loop.done");
  if (settings_.sim.progress) settings_.sim.progress(step_, settings_.max_steps);
  if (auto s = take_outputs(parts_.spec, *loop, before, result); !s.ok()) return s;
  const float lr_now = loop->outputs.back()[0].at("learning_rate").f[0];
  const double sim_step = (f.device + settings_.loop_overhead_s) / n;
  auto crossed = [&](int64_t every) { return every > 0 && step_ / every > before / every; };
  if (crossed(config.log_step_count_steps) || step_ >= settings_.max_steps)
    log_progress(result->final_loss, sim_step);
  const bool values = !settings_.sim.timing_only;
  if (crossed(config.save_summary_steps)) {
    if (auto s = write_summaries(*parts_.summaries, step_, n, result->final_loss, lr_now, f,
                                 sim_step, values);
        !s.ok())
      return s;
  }
  // A timing-only run's variables hold no values (variable_shapes), so it writes no checkpoint:
  // the model_dir keeps the global step it had, and no untrained weights are labelled as trained.
  if (values && (crossed(config.save_checkpoints_steps) || step_ >= settings_.max_steps)) {
    auto saved =
        save_checkpoint(config.model_dir, step_, parts_.variables, config.keep_checkpoint_max);
    if (!saved.ok()) return saved.status();
    settings_.log(str_cat("saved ", *saved));
  }
  return absl::OkStatus();
}

void TrainLoop::finish_figures(TrainResult* result) const {
  result->global_step = step_;
  result->steps_run = step_ - settings_.start_step;
  result->values_computed = !settings_.sim.timing_only;
  result->host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - settings_.host_start)
          .count();
  result->sim_seconds = host_clock_;
  result->sim_seconds_per_step = host_clock_ / static_cast<double>(result->steps_run);
  result->infeed_wait_fraction = device_seconds_ > 0 ? wait_seconds_ / device_seconds_ : 0;
  result->device_seconds = device_seconds_;
  result->input_seconds = wait_seconds_;
  result->host_overhead_seconds = host_clock_ - device_seconds_;
  result->mxu_utilization = device_seconds_ > 0 ? mxu_weighted_ / device_seconds_ : 0;
  for (runtime::OpTiming& o : result->ops) {
    const auto steps_run = static_cast<double>(result->steps_run);
    o.flops /= steps_run;
    o.mxu_flops /= steps_run;
    o.hbm_bytes /= steps_run;
    o.ici_bytes /= steps_run;
    o.seconds /= steps_run;
    o.instructions /= static_cast<uint64_t>(result->steps_run);
  }
}

absl::Status TrainLoop::run(TrainResult* result) {
  while (step_ < settings_.max_steps) {
    if (auto s = train_one_loop(result); !s.ok()) return s;
  }
  finish_figures(result);
  if (settings_.sim.timing_only) {
    settings_.log("timing-only: no checkpoint written (no values computed)");
  } else {
    result->weights_fingerprint = weights_fingerprint(parts_.variables);
  }
  auto analysis = parts_.trace->finish();
  if (!analysis.ok()) return analysis.status();
  result->analysis = *std::move(analysis);
  result->trace_bytes = parts_.trace->file_bytes();
  result->profile_path = parts_.trace->profile_path();
  return absl::OkStatus();
}

}  // namespace tpusim::estimator::internal
