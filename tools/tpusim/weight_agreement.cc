#include "tools/tpusim/weight_agreement.h"

#include <algorithm>
#include <cmath>

namespace tpusim::cli {

WeightDifference weight_difference(const std::vector<float>& a, const std::vector<float>& ref,
                                   double rtol, double atol) {
  double abs_diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    // NaN in either differs from everything: a diverged run must not read as agreeing.
    const double d = std::abs(static_cast<double>(a[i]) - ref[i]);
    abs_diff = std::isnan(d) ? d : std::max(abs_diff, d);
    if (std::isnan(abs_diff)) break;
    scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
  }
  WeightDifference w;
  w.max_abs = abs_diff;
  w.max_rel = scale > 0 ? abs_diff / scale : abs_diff;
  w.agree = !std::isnan(abs_diff) && abs_diff <= atol + rtol * scale;
  return w;
}

}  // namespace tpusim::cli
