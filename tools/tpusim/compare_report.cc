#include "tools/tpusim/compare_report.h"

#include <iostream>
#include <optional>

#include <fmt/format.h>

namespace tpusim::cli {

void print_judgement(const nlohmann::ordered_json& entry, const std::string& heading,
                     const jobs::Tolerances& tol, bool with_baseline) {
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
