#pragma once
// TPUEstimator::train's loop (estimator_train.cc sets it up): device loops of
// iterations_per_loop steps, each followed by what its steps call for (the host_call, the log
// line, the summaries, the checkpoint), then the run's figures. Not part of the API.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <absl/status/status.h>

#include "estimator/estimator.h"
#include "estimator/summary_writer.h"
#include "estimator/train_trace.h"
#include "runtime/backend/backend.h"
#include "runtime/infeed/infeed_driver.h"

namespace tpusim::estimator::internal {

// The training loop: what it works with and how far it has come.
struct TrainLoop {
  const RunConfig& config;
  runtime::Backend& backend;
  runtime::Executable& exe;
  runtime::Variables& variables;
  const TPUEstimatorSpec& spec;
  runtime::InfeedDriver& driver;
  TrainTrace& trace;
  SummaryWriter& summaries;
  double loop_overhead_s;
  std::function<void(const std::string&)> log;
  std::chrono::steady_clock::time_point host_start;
  int64_t max_steps;

  int64_t step;           // the global step reached
  int64_t last_log_step;  // the global step of the last log line
  double host_clock = 0;  // simulated time since the input pipeline started
  double device_seconds = 0, wait_seconds = 0, mxu_weighted = 0;
  double last_log_host = 0;
};

// Trains to max_steps a loop at a time, then puts the run's figures, weights fingerprint and
// trace analysis into `result`.
absl::Status train_to_max_steps(TrainLoop& t, int64_t start_step, TrainResult* result);

}  // namespace tpusim::estimator::internal
