#include "estimator/jobs/compare_verdict.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace tpusim::jobs {

nlohmann::ordered_json judge(const std::vector<float>& losses_of_run,
                             const std::vector<float>& reference_losses, const Differences& d,
                             const Differences* baseline, const Tolerances& tol) {
  const std::vector<double> drift =
      baseline ? running_max(baseline->losses) : std::vector<double>();
  nlohmann::ordered_json losses = nlohmann::ordered_json::array();
  double worst_loss = 0;
  int steps_over = 0;
  for (size_t s = 0; s < d.losses.size(); ++s) {
    const double diff = d.losses[s];
    const double limit = std::max(tol.loss, s < drift.size() ? tol.noise_factor * drift[s] : 0.0);
    const bool within = diff <= limit;  // false for NaN
    worst_loss = max_or_nan(worst_loss, diff);
    steps_over += within ? 0 : 1;
    nlohmann::ordered_json step = {
        {"step", s + 1},      {"loss", losses_of_run[s]}, {"reference_loss", reference_losses[s]},
        {"difference", diff}, {"limit", limit},           {"agree", within}};
    if (baseline && s < baseline->losses.size()) step["baseline_difference"] = baseline->losses[s];
    losses.push_back(step);
  }
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  nlohmann::ordered_json over = nlohmann::ordered_json::array();
  double worst_rel = 0;
  for (const auto& [name, w] : d.variables) {
    double noise = 0;
    if (baseline) {
      auto it = baseline->variables.find(name);
      if (it != baseline->variables.end()) noise = it->second.max_abs;
    }
    const bool agree = w.agree || (baseline && w.max_abs <= tol.noise_factor * noise);
    worst_rel = max_or_nan(worst_rel, w.max_rel);
    vars[name] = {{"max_abs", w.max_abs}, {"max_rel", w.max_rel}, {"agree", agree}};
    if (baseline) vars[name]["baseline_max_abs"] = noise;
    if (!agree) over.push_back(name);
  }
  const bool pass = steps_over == 0 && over.empty();
  return {{"max_loss_difference", worst_loss},
          {"max_relative_weight_difference", worst_rel},
          {"steps_over_tolerance", steps_over},
          {"variables_over_tolerance", over},
          {"verdict", pass ? "agree" : "differ"},
          {"losses", losses},
          {"variables", vars}};
}

}  // namespace tpusim::jobs
