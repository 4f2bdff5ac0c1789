#pragma once
// TPUEstimator::train's loop (estimator_train.cc sets it up): device loops of
// iterations_per_loop steps, each followed by what its steps call for (the host_call, the log
// line, the summaries, the checkpoint), then the run's figures. Not part of the API.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <absl/status/status.h>

#include "estimator/estimator.h"
#include "estimator/summary_writer.h"
#include "estimator/train_trace.h"
#include "runtime/backend/backend.h"
#include "runtime/infeed/infeed_driver.h"

namespace tpusim::estimator::internal {

// One device loop's figures.
struct LoopFigures {
  double host = 0;    // seconds it took on this host
  double device = 0;  // simulated seconds (the host's when the backend simulates no time)
  double wait = 0;    // of them, the slowest replica's infeed wait
  double mxu = 0;     // the replicas' mean MXU utilisation
};

// The training loop. It owns what train() set up for it (the compiled step, the variables, the
// infeed driver, the trace, the summary writer) and counts how far it has come.
class TrainLoop {
 public:
  // What it runs by: the estimator's configs, the host's round trip, where its lines go, when
  // the run started, and the global steps it starts at and trains to.
  struct Settings {
    const RunConfig& config;
    const SimulatorOptions& sim;
    double loop_overhead_s = 0;
    std::function<void(const std::string&)> log;
    std::chrono::steady_clock::time_point host_start;
    int64_t start_step = 0;
    int64_t max_steps = 0;
  };
  // What train() hands over.
  struct Parts {
    std::unique_ptr<runtime::Executable> exe;
    runtime::Variables variables;
    TPUEstimatorSpec spec;
    std::unique_ptr<runtime::InfeedDriver> driver;
    std::unique_ptr<TrainTrace> trace;
    std::unique_ptr<SummaryWriter> summaries;
  };

  TrainLoop(runtime::Backend& backend, Settings settings, Parts parts);

  // Trains to max_steps a loop at a time, then puts the run's figures, weights fingerprint and
  // trace analysis into `result`.
  absl::Status run(TrainResult* result);

 private:
  // A device loop of `n` steps from step_ with the host's round trip after it, traced.
  absl::StatusOr<runtime::LoopResult> run_device_loop(uint32_t n, LoopFigures* figures);
  // One device loop of up to iterations_per_loop steps and what follows it: the figures, the
  // outputs, the log line, the summaries and the checkpoint, each when its step comes.
  absl::Status train_one_loop(TrainResult* result);
  // The log line at global step step_.
  void log_progress(float loss, double sim_step);
  // The run's totals into `result`, the op timings per step.
  void finish_figures(TrainResult* result) const;

  runtime::Backend& backend_;
  const Settings settings_;
  Parts parts_;
  int64_t step_;           // the global step reached
  int64_t last_log_step_;  // the global step of the last log line
  double host_clock_ = 0;  // simulated time since the input pipeline started
  double device_seconds_ = 0, wait_seconds_ = 0, mxu_weighted_ = 0;
  double last_log_host_ = 0;
};

}  // namespace tpusim::estimator::internal
