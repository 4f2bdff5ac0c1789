#include "tools/tpusim/compare_verdict.h"

#include <algorithm>
#include <iostream>
#include <optional>

#include <fmt/format.h>

namespace tpusim::cli {

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

void print_judgement(const nlohmann::ordered_json& entry, const std::string& heading,
                     const Tolerances& tol, bool with_baseline) {
  std::cout << heading << ":\n";
  const auto& losses = entry["losses"];
  std::optional<size_t> first_over;
  for (size_t s = 0; s < losses.size(); ++s) {
    const auto& l = losses[s];
    if (!l["agree"].get<bool>() && !first_over) first_over = s;
    std::cout << fmt::format(
        "  step {:4}  loss {:.6f} vs {:.6f}  diff {:.2e}{}{}\n", l["step"].get<int>(),
        l["loss"].get<double>(), l["reference_loss"].get<double>(), l["difference"].get<double>(),
        l.contains("baseline_difference")
            ? fmt::format("  baseline {:.2e}", l["baseline_difference"].get<double>())
            : "",
        l["agree"].get<bool>() ? "" : "  over tolerance");
  }
  const auto& vars = entry["variables"];
  for (auto it = vars.begin(); it != vars.end(); ++it) {
    std::cout << fmt::format(
        "  {:40} max abs {:.2e}  max rel {:.2e}{}{}\n", it.key(),
        it.value()["max_abs"].get<double>(), it.value()["max_rel"].get<double>(),
        with_baseline
            ? fmt::format("  baseline {:.2e}", it.value()["baseline_max_abs"].get<double>())
            : "",
        it.value()["agree"].get<bool>() ? "" : "  over tolerance");
  }
  const std::string noise =
      with_baseline ? fmt::format(" or {:g} x the baseline's", tol.noise_factor) : "";
  const std::string loss_part =
      !first_over
          ? fmt::format("every step's loss within {:g}{}", tol.loss, noise)
          : fmt::format("{} of {} steps' losses over {:g}{}, the first step {} by {:.2e}",
                        entry["steps_over_tolerance"].get<int>(), losses.size(), tol.loss, noise,
                        *first_over + 1, losses[*first_over]["difference"].get<double>());
  const size_t over = entry["variables_over_tolerance"].size();
  const std::string weight_part =
      over == 0 ? fmt::format("every variable within {:g} + {:g} x its largest value{}",
                              tol.weight_abs, tol.weight_rel, noise)
                : fmt::format("{} of {} variables over {:g} + {:g} x their largest value{}", over,
                              vars.size(), tol.weight_abs, tol.weight_rel, noise);
  std::cout << fmt::format("  verdict: {} ({}; {})\n",
                           entry["verdict"] == "agree" ? "agree" : "DIFFER", loss_part,
                           weight_part);
}

}  // namespace tpusim::cli
