// tpusim compare's numerics: whether one backend's trained variable agrees with the reference's,
// and the rounding baseline (how far a run drifts from initial weights one ulp apart).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tpusim::jobs {

struct WeightDifference {
  double max_abs = 0;  // max |a - ref| over the elements
  double max_rel = 0;  // max_abs over the reference's largest |value| (max_abs where that is 0)
  bool agree = true;   // max_abs <= atol + rtol * (the reference's largest |value|), all finite
};

// One run's differences from another: per step's loss, and per (non-integer) variable.
struct Differences {
  std::vector<double> losses;
  std::map<std::string, WeightDifference> variables;
};

// numpy.allclose's rule with the variable's largest magnitude as the scale, so that elements
// near zero do not blow the ratio up, and atol as the floor for variables that stay near zero
// (a convolution's bias ahead of a batch norm: its gradient is zero but for rounding, so both
// backends hold noise of 1e-8 whose relative difference is about 1). Sizes must match.
WeightDifference weight_difference(const std::vector<float>& a, const std::vector<float>& ref,
                                   double rtol, double atol);

// Moves every nonzero, finite element one ulp up or down (a fixed pseudo-random choice per
// element, seeded by `name` and `pattern`), zeros left as they are: a rounding's worth of
// difference. Each pattern is an independent draw of the signs.
void nudge_one_ulp(const std::string& name, std::vector<float>* values, uint32_t pattern = 0);

// The larger of two differences, NaN when either is: a diverged run stays the worst.
double max_or_nan(double a, double b);

// Element s: the largest of values[0..s] (NaN once any is NaN): the baseline's drift so far.
std::vector<double> running_max(const std::vector<double>& values);

// The first step (0-based) whose loss is over `factor` times the first step's, or not finite:
// the training diverges there, and a diverging run amplifies any rounding difference until
// backends part whatever their numerics. -1 when none does.
int64_t first_diverging_step(const std::vector<float>& losses, double factor = 10);

}  // namespace tpusim::jobs
