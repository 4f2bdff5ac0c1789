#include "estimator/jobs/compare_numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpusim::jobs {

double max_or_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
}

WeightDifference weight_difference(const std::vector<float>& a, const std::vector<float>& ref,
                                   double rtol, double atol) {
  double abs_diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    // NaN in either differs from everything: a diverged run must not read as agreeing.
    const double d = std::abs(static_cast<double>(a[i]) - ref[i]);
    abs_diff = max_or_nan(abs_diff, d);
    if (std::isnan(abs_diff)) break;
    scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
  }
  WeightDifference w;
  w.max_abs = abs_diff;
  w.max_rel = scale > 0 ? abs_diff / scale : abs_diff;
  // A NaN or infinity on either side differs whatever the tolerances (an infinite reference
  // would otherwise make its scale, and so every difference, acceptable).
  w.agree = std::isfinite(abs_diff) && std::isfinite(scale) && abs_diff <= atol + rtol * scale;
  return w;
}

void nudge_one_ulp(const std::string& name, std::vector<float>* values, uint32_t pattern) {
  uint64_t seed = 1469598103934665603ull;  // FNV-1a of the name: the same pattern every run
  for (const char c : name) seed = (seed ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  seed += pattern * 0xd1b54a32d192ed03ull;  // pattern 0: the signs compare has always drawn
  for (size_t i = 0; i < values->size(); ++i) {
    float& x = (*values)[i];
    if (x == 0 || !std::isfinite(x)) continue;
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64's mix
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = std::nextafter(x, (z & 1) != 0 ? std::numeric_limits<float>::infinity()
                                       : -std::numeric_limits<float>::infinity());
  }
}

std::vector<double> running_max(const std::vector<double>& values) {
  std::vector<double> out(values.size());
  double so_far = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    so_far = max_or_nan(so_far, values[i]);
    out[i] = so_far;
  }
  return out;
}

int64_t first_diverging_step(const std::vector<float>& losses, double factor) {
  for (size_t s = 0; s < losses.size(); ++s) {
    if (!std::isfinite(losses[s]) || (s > 0 && losses[s] > factor * std::fabs(losses[0])))
      return static_cast<int64_t>(s);
  }
  return -1;
}

}  // namespace tpusim::jobs
