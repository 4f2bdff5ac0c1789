#include "tools/tpusim/train_report.h"

#include <iostream>

#include <fmt/format.h>

#include "common/strings.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/hbm_account.h"
#include "tools/tpusim/op_report.h"

namespace tpusim::cli {
namespace {

// An evaluation metric as the report holds it: null when there was no evaluation.
nlohmann::ordered_json metric_or_null(const std::map<std::string, double>& eval,
                                      const std::string& name) {
  const auto it = eval.find(name);
  return it == eval.end() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(it->second);
}

// What the run's values came to: the final loss and the evaluation (the test accuracy, or a
// BERT's pretraining metrics), or why there are none.
std::string values_summary(const estimator::TrainResult& r,
                           const std::map<std::string, double>& eval) {
  if (!r.values_computed)
    return fmt::format("global step {}: no loss or accuracy (timing-only: no values computed)",
                       r.global_step);
  const std::string loss =
      r.steps_run == 0 ? std::string("no loss (no step trained: the checkpoint is at max_steps)")
                       : fmt::format("final loss {:.4f}", r.final_loss);
  std::string evaluated = "not evaluated";
  if (const auto it = eval.find("accuracy"); it != eval.end()) {
    evaluated = fmt::format("test accuracy {:.4f}", it->second);
  } else if (!eval.empty()) {
    std::vector<std::string> metrics;
    for (const auto& [name, value] : eval) {
      if (name != "global_step") metrics.push_back(fmt::format("{} {:.4f}", name, value));
    }
    evaluated = str_join(metrics, ", ");
  }
  return fmt::format("global step {}: {}, {}", r.global_step, loss, evaluated);
}

}  // namespace

void print_start(const TrainJob& job) {
  const auto& c = job.config;
  const auto& sim = job.sim;
  std::cout << fmt::format(
      "training {}{}{} on {} ({} cores), global batch {}, {} steps per loop, {} "
      "at {}, {} precision; model_dir {}\n",
      job.model,
      job.bert.has_value() ? str_cat(" (", job.bert->seq_length, " tokens, ",
                                     job.bert->synthetic ? "synthetic" : job.bert->dir, ")")
                           : "",
      job.policy == runtime::models::DTypePolicy::kFloat32
          ? ""
          : str_cat(" (", runtime::models::dtype_policy_name(job.policy), ")"),
      run_target(*job.backend, sim.slice), c.tpu_config.num_shards, job.flags.batch, job.flags.ipl,
      runtime::optimizer_name(job.optimizer.kind), job.flags.lr,
      runtime::kPrecisions.name(sim.compile.precision), c.model_dir);
  if (job.policy == runtime::models::DTypePolicy::kMixedBFloat16 &&
      !job.backend->mixed_bfloat16_note.empty()) {
    std::cout << "note: " << job.backend->mixed_bfloat16_note << "\n";
  }
}

// The run's figures as `--report` writes them.
nlohmann::ordered_json train_report(const TrainJob& job, const estimator::TrainResult& r,
                                    const std::map<std::string, double>& eval) {
  const auto& c = job.config;
  const auto& sim = job.sim;
  const double steps_run = std::max<double>(1, static_cast<double>(r.steps_run));
  nlohmann::ordered_json report = {
      {"model", job.model},
      {"dtype_policy", runtime::models::dtype_policy_name(job.policy)},
      {"precision", runtime::kPrecisions.name(sim.compile.precision)},
      {"backend", sim.backend},
      {"config", job.backend->supports.runs_a_slice ? sim.slice : sim.backend},
      {"model_dir", c.model_dir},
      {"global_step", r.global_step},
      {"steps_run", r.steps_run},
      // null where the run computed no value (timing-only) or did not evaluate: never a 0 that
      // reads as a result.
      {"final_loss",
       r.values_computed && r.steps_run > 0 ? nlohmann::ordered_json(r.final_loss) : nullptr},
      {"eval_accuracy", metric_or_null(eval, "accuracy")},
      {"eval_loss", metric_or_null(eval, "loss")},
      {"eval_metrics", eval},
      {"sim_seconds_per_step", r.sim_seconds_per_step},
      {"examples_per_second",
       r.sim_seconds_per_step > 0
           ? nlohmann::ordered_json(static_cast<double>(job.flags.batch) / r.sim_seconds_per_step)
           : nullptr},
      {"host_seconds", r.host_seconds},
      {"infeed_wait_fraction", r.infeed_wait_fraction},
      {"mxu_utilization", r.mxu_utilization},
      {"step_breakdown",
       {{"compute", (r.device_seconds - r.input_seconds) / steps_run},
        {"input", r.input_seconds / steps_run},
        {"idle", r.host_overhead_seconds / steps_run}}},
      {"weights_fingerprint", r.weights_fingerprint.empty()
                                  ? nlohmann::ordered_json(nullptr)
                                  : nlohmann::ordered_json(r.weights_fingerprint)},
      {"timing_only", sim.timing_only},
      {"fold_replicas", sim.fold_replicas},
      {"allreduce_combine_bytes", sim.compile.allreduce_combine_bytes},
      {"input", job.data.synthetic     ? "synthetic"
                : job.bert.has_value() ? "records"
                : job.data.jpeg        ? "jpeg"
                                       : "raw"},
      {"image_size", job.bert.has_value() ? nlohmann::ordered_json(nullptr)
                                          : nlohmann::ordered_json(job.data.image_size)},
      {"seq_length", job.bert.has_value() ? nlohmann::ordered_json(job.bert->seq_length)
                                          : nlohmann::ordered_json(nullptr)},
      {"map_threads", job.data.map_threads},
      {"batch_threads", job.data.batch_threads},
      {"enqueue_threads", job.data.enqueue_threads},
      {"infeed_dtype", job.data.bf16_images ? "bf16" : "f32"},
  };
  // The analyzer's breakdown has every profiler category and sums to its step time, the
  // slowest core's each step (a little above sim_seconds_per_step, the loops' average).
  if (r.analysis.has_value()) report["analysis"] = r.analysis->to_json();
  add_op_profile(r.ops, r.roofs, &report);
  add_hbm_account(r.ops, r.roofs, r.hbm_floor, &report);
  if (!sim.trace_path.empty()) {
    report["trace"] = sim.trace_path;
    report["trace_bytes"] = r.trace_bytes;
  }
  if (!r.profile_path.empty()) report["profile"] = r.profile_path;
  return report;
}

void print_summary(const TrainJob& job, const estimator::TrainResult& r,
                   const std::map<std::string, double>& eval,
                   const nlohmann::ordered_json& report) {
  const auto& breakdown = report["step_breakdown"];
  std::cout << values_summary(r, eval) << "\n";
  if (r.steps_run == 0) {  // no step, no step time: a 0 would read as a result
    std::cout << "no simulated step (no step trained)\n";
    return;
  }
  std::cout << fmt::format(
      "simulated step {:.3f} ms ({:.0f} examples/s) = compute {:.3f} + input {:.3f} + host "
      "round trips {:.3f} (infeed wait {:.1f}%, MXU {:.1f}%); {:.1f} s on this host\n"
      "TensorBoard: tensorboard --logdir {}\n",
      r.sim_seconds_per_step * 1e3,
      r.sim_seconds_per_step > 0 ? static_cast<double>(job.flags.batch) / r.sim_seconds_per_step
                                 : 0.0,
      breakdown["compute"].get<double>() * 1e3, breakdown["input"].get<double>() * 1e3,
      breakdown["idle"].get<double>() * 1e3, 100 * r.infeed_wait_fraction, 100 * r.mxu_utilization,
      r.host_seconds, job.config.model_dir);
  if (r.analysis.has_value()) std::cout << "\n" << r.analysis->to_text();
  if (!r.ops.empty()) std::cout << "\n" << op_profile_text(r.ops, r.roofs, 8);
  std::cout << hbm_account_text(r.ops, r.roofs, r.hbm_floor, 5);
  if (!job.sim.trace_path.empty()) {
    std::cout << fmt::format("trace: {} ({:.1f} MB); tpusim analyze {}\n", job.sim.trace_path,
                             static_cast<double>(r.trace_bytes) / 1e6, job.sim.trace_path);
  }
  if (!r.profile_path.empty()) {
    std::cout << fmt::format("profile: {} (xprof --logdir {})\n", r.profile_path,
                             job.config.model_dir);
  }
}

}  // namespace tpusim::cli
