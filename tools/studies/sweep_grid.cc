#include "tools/studies/sweep_grid.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "common/strings.h"
#include "configs/overrides.h"

namespace tpusim::studies {

absl::StatusOr<SweepAxis> parse_sweep_axis(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    return absl::InvalidArgumentError(
        str_cat("--set '", spec, "': give FIELD=v1,v2,... (e.g. chip.core.mxu_count=1,2,4)"));
  }
  SweepAxis axis;
  axis.field = spec.substr(0, eq);
  std::stringstream in(spec.substr(eq + 1));
  for (std::string v; std::getline(in, v, ',');) {
    if (v.empty()) return absl::InvalidArgumentError(str_cat("--set '", spec, "': an empty value"));
    axis.values.push_back(v);
  }
  if (spec.back() == ',')
    return absl::InvalidArgumentError(str_cat("--set '", spec, "': an empty value"));
  axis.config = config::is_config_path(axis.field);
  if (!axis.config) {
    for (char c : axis.field) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
        return absl::InvalidArgumentError(
            str_cat("--set '", spec, "': '", axis.field,
                    "' is neither a slice config field (chip..., topology..., host..., "
                    "chips_per_host) nor a run option name"));
      }
    }
  }
  return axis;
}

absl::Status check_sweep_size(const std::vector<SweepAxis>& axes) {
  size_t points = 1;
  std::vector<std::string> sizes;
  for (const SweepAxis& axis : axes) {
    sizes.push_back(std::to_string(axis.values.size()));
    // Saturated at kMaxSweepPoints + 1, so the product fits (at most about 10^10).
    const size_t values = std::min(axis.values.size(), kMaxSweepPoints + 1);
    points = std::min(points * values, kMaxSweepPoints + 1);
  }
  if (points <= kMaxSweepPoints) return absl::OkStatus();
  return absl::InvalidArgumentError(str_cat("the grid of ", str_join(sizes, " x "),
                                            " values has more than ", kMaxSweepPoints,
                                            " points; split the study"));
}

std::vector<SweepPoint> sweep_points(const std::vector<SweepAxis>& axes) {
  std::vector<SweepPoint> points;
  std::vector<size_t> at(axes.size(), 0);
  if (axes.empty()) return points;
  for (;;) {
    SweepPoint p;
    p.id = fmt::format("p{:03d}", points.size());
    for (size_t a = 0; a < axes.size(); ++a) p.values.push_back(axes[a].values[at[a]]);
    points.push_back(std::move(p));
    size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++at[a] < axes[a].values.size()) break;
      at[a] = 0;
      if (a == 0) return points;
    }
  }
}

std::string run_option_flag(const std::string& field) {
  std::string flag = "--" + field;
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

std::string describe_point(const std::vector<SweepAxis>& axes, const SweepPoint& point) {
  std::vector<std::string> parts;
  for (size_t a = 0; a < axes.size(); ++a) parts.push_back(axes[a].field + "=" + point.values[a]);
  return str_join(parts, " ");
}

}  // namespace tpusim::studies
