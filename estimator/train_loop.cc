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

// One device loop's figures.
struct LoopFigures {
  double host = 0;    // seconds it took on this host
  double device = 0;  // simulated seconds (the host's when the backend simulates no time)
  double wait = 0;    // of them, the slowest replica's infeed wait
  double mxu = 0;     // the replicas' mean MXU utilisation
};

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

// A device loop of `n` steps from t.step with the host's round trip after it, traced.
absl::StatusOr<runtime::LoopResult> run_device_loop(TrainLoop& t, uint32_t n,
                                                    LoopFigures* figures) {
  auto steps = t.driver.next_loop(n, t.backend.device_now_seconds());
  if (!steps.ok()) return steps.status();
  const auto loop_start = std::chrono::steady_clock::now();
  t.trace.before_loop(t.step + 1, t.step + n);
  auto loop = t.backend.run_loop(t.exe, t.variables, *steps, static_cast<uint64_t>(t.step));
  if (!loop.ok()) return loop.status();
  if (auto s = t.backend.host_round_trip(t.loop_overhead_s); !s.ok()) return s;
  t.trace.after_loop(t.driver);
  const double loop_host =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  *figures = loop_figures(loop->timing, loop_host);
  return loop;
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

// The log line at global step t.step.
void log_progress(TrainLoop& t, float loss, double sim_step) {
  const double host_now =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t.host_start).count();
  // A timing-only run computed no loss: say so rather than print the zeros it holds.
  const std::string figure = t.config.timing_only ? std::string(": no loss (timing-only)")
                                                  : ": loss = " + fmt::format("{:.4f}", loss);
  t.log(str_cat("global_step ", t.step, figure, " (",
                fmt::format("{:.2f}", (t.step - t.last_log_step) / (host_now - t.last_log_host)),
                " steps/s host, ", fmt::format("{:.3f}", sim_step * 1e3), " ms/step simulated)"));
  t.last_log_host = host_now;
  t.last_log_step = t.step;
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

// One device loop of up to iterations_per_loop steps and what follows it: the figures, the
// outputs, the log line, the summaries and the checkpoint, each when its step comes.
absl::Status train_one_loop(TrainLoop& t, TrainResult* result) {
  const auto n = static_cast<uint32_t>(
      std::min<int64_t>(t.config.tpu_config.iterations_per_loop, t.max_steps - t.step));
  LoopFigures f;
  auto loop = run_device_loop(t, n, &f);
  if (!loop.ok()) return loop.status();
  t.device_seconds += f.device;
  t.wait_seconds += f.wait;
  runtime::add_op_timings(loop->timing.ops, &result->ops);
  result->roofs = loop->timing.roofs;
  t.mxu_weighted += f.mxu * f.device;
  t.host_clock += f.device + t.loop_overhead_s;
  const int64_t before = t.step;
  t.step += n;
  fault_point("loop.done");
  if (t.config.progress) t.config.progress(t.step, t.max_steps);
  if (auto s = take_outputs(t.spec, *loop, before, result); !s.ok()) return s;
  const float lr_now = loop->outputs.back()[0].at("learning_rate").f[0];
  const double sim_step = (f.device + t.loop_overhead_s) / n;
  auto crossed = [&](int64_t every) { return every > 0 && t.step / every > before / every; };
  if (crossed(t.config.log_step_count_steps) || t.step >= t.max_steps)
    log_progress(t, result->final_loss, sim_step);
  if (crossed(t.config.save_summary_steps)) {
    if (auto s = write_summaries(t.summaries, t.step, n, result->final_loss, lr_now, f, sim_step,
                                 !t.config.timing_only);
        !s.ok())
      return s;
  }
  // A timing-only run's variables hold no values (variable_shapes), so it writes no checkpoint:
  // the model_dir keeps the global step it had, and no untrained weights are labelled as trained.
  if (!t.config.timing_only &&
      (crossed(t.config.save_checkpoints_steps) || t.step >= t.max_steps)) {
    auto saved =
        save_checkpoint(t.config.model_dir, t.step, t.variables, t.config.keep_checkpoint_max);
    if (!saved.ok()) return saved.status();
    t.log(str_cat("saved ", *saved));
  }
  return absl::OkStatus();
}

// The run's totals into `result`, the op timings per step.
void finish_figures(const TrainLoop& t, int64_t start_step, TrainResult* result) {
  result->global_step = t.step;
  result->steps_run = t.step - start_step;
  result->values_computed = !t.config.timing_only;
  result->host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t.host_start).count();
  result->sim_seconds = t.host_clock;
  result->sim_seconds_per_step = t.host_clock / static_cast<double>(result->steps_run);
  result->infeed_wait_fraction = t.device_seconds > 0 ? t.wait_seconds / t.device_seconds : 0;
  result->device_seconds = t.device_seconds;
  result->input_seconds = t.wait_seconds;
  result->host_overhead_seconds = t.host_clock - t.device_seconds;
  result->mxu_utilization = t.device_seconds > 0 ? t.mxu_weighted / t.device_seconds : 0;
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

}  // namespace

// Trains to max_steps a loop at a time, then puts the run's figures, weights fingerprint and
// trace analysis into `result`.
absl::Status train_to_max_steps(TrainLoop& t, int64_t start_step, TrainResult* result) {
  while (t.step < t.max_steps) {
    if (auto s = train_one_loop(t, result); !s.ok()) return s;
  }
  finish_figures(t, start_step, result);
  if (t.config.timing_only) {
    t.log("timing-only: no checkpoint written (no values computed)");
  } else {
    result->weights_fingerprint = weights_fingerprint(t.variables);
  }
  auto analysis = t.trace.finish();
  if (!analysis.ok()) return analysis.status();
  result->analysis = *std::move(analysis);
  result->trace_bytes = t.trace.file_bytes();
  return absl::OkStatus();
}

}  // namespace tpusim::estimator::internal
