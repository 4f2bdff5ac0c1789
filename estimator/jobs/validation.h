#pragma once
// The published TPU results tpusim's predictions are held against (`tpusim validate`,
// docs/validation.md): each case a zoo model trained on a slice at the global batch of the
// published run, timing-only on synthetic input (TensorFlow's fake data for performance runs),
// in mixed_bfloat16 with momentum as the reference models, the gradients all-reduced by the 2-D
// torus algorithm as on TPU pods. No figure here is tuned to a target:
// the prediction is the simulator's and the error is reported as it comes out.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

#include "traces/analyzer.h"

namespace tpusim::jobs {

struct ValidationCase {
  std::string name;  // "resnet50-v3-8"
  std::string model;
  std::string slice;
  int64_t global_batch = 0;
  // Examples a second measured on the real slice; 0 for a prediction whose measured figure is
  // not given here (checked later against figures the project does not hold).
  double measured_examples_per_second = 0;
  std::string source;      // where the measured figure comes from, or why it is a prediction
  int64_t seq_length = 0;  // BERT cases: tokens per sequence
};

// Every case, measured ones first.
const std::vector<ValidationCase>& validation_cases();

// Why `c` cannot run yet (its model is not in the zoo), or "" when it can.
std::string validation_case_pending(const ValidationCase& c);

// The relative error of a predicted step time against a measured one: predicted / measured - 1
// (+0.25: the prediction is 25% slower).
double step_time_error(double predicted_seconds, double measured_seconds);

// A run of 3 steps or more in one loop gives the steady state the published rates measure
// (epochs of steps in loops of an epoch, iterations_per_loop 1251 in the reference ResNet-50's
// resnet_main.py, each step's input enqueued while the one before runs):
// the steps between the loop's first, which waits for its batch to cross the link, and its last,
// which holds the loop's closing host round trip. A shorter run gives the plain average.
// The steady state of a loop's steps (above): the mean of the steps between its first and its
// last; none with fewer than 3 steps.
std::optional<double> steady_step_seconds(const std::vector<traces::StepBreakdown>& steps);

struct ValidationResult {
  double step_seconds = 0;       // simulated: the steady state, or the loop's average
  bool steady_state = false;     // whether step_seconds is the steady state (3 steps or more)
  double loop_step_seconds = 0;  // the average over every step run, round trips included
  double examples_per_second = 0;
  double mxu_utilization = 0;
  double host_seconds = 0;  // what the run took on this machine
};

// Edits of a case's slice config, each (dotted field path, value) as `tpusim sweep --set` names
// them (configs/overrides.h): what the case would do on another chip or topology.
using SliceEdits = std::vector<std::pair<std::string, std::string>>;

// Trains `c` for `steps` steps timing-only in a scratch model_dir (removed after), replicas
// folded on a slice of more than one host, its slice edited by `edits`; progress on `log` (may
// be empty).
absl::StatusOr<ValidationResult> run_validation_case(
    const ValidationCase& c, int64_t steps, const std::function<void(const std::string&)>& log,
    const SliceEdits& edits = {});

}  // namespace tpusim::jobs
