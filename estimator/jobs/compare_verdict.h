// tpusim compare's verdicts: one backend's run judged against the reference, with or without the
// rounding baseline, as the report's "against" entry (the CLI prints it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "estimator/jobs/compare_numerics.h"

namespace tpusim::jobs {

struct Tolerances {
  double loss = 0;          // |loss difference| accepted at any step
  double weight_rel = 0;    // a variable's max |difference| over its largest |value| ...
  double weight_abs = 0;    // ... on top of this absolute floor
  double noise_factor = 0;  // how many times the baseline's drift a difference may be
};

// A run's differences `d` from the reference, judged: a step's loss agrees within tol.loss or
// noise_factor x the baseline's largest drift up to that step, a variable within the weight
// tolerances (d's own `agree`) or noise_factor x the baseline's difference in it. `baseline`
// may be null. Returns the report's "against" entry: max_loss_difference,
// max_relative_weight_difference, steps_over_tolerance, variables_over_tolerance, verdict
// ("agree" | "differ"), losses (per step) and variables.
nlohmann::ordered_json judge(const std::vector<float>& losses_of_run,
                             const std::vector<float>& reference_losses, const Differences& d,
                             const Differences* baseline, const Tolerances& tol);

}  // namespace tpusim::jobs
