// tpusim compare's numerics (tpusim::jobs): whether a trained variable agrees with the reference's,
// the rounding baseline's one-ulp nudges and drift, and where a run diverges.

#include "estimator/jobs/compare_numerics.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::jobs {
namespace compare_numerics_test {

// compare's rule: max |a - ref| <= atol + rtol x the reference's largest |value|.
TEST(WeightDifference, ScalesByTheLargestValueWithAnAbsoluteFloor) {
  // A kernel: 0.002 apart where the largest value is 0.5, 0.4% of it.
  const std::vector<float> kernel{0.5f, -0.25f, 0.001f}, kernel_b{0.5f, -0.248f, 0.001f};
  WeightDifference w = weight_difference(kernel_b, kernel, 1e-2, 1e-6);
  EXPECT_NEAR(w.max_abs, 0.002, 1e-7);
  EXPECT_NEAR(w.max_rel, 0.004, 1e-6);
  EXPECT_TRUE(w.agree);
  EXPECT_FALSE(weight_difference(kernel_b, kernel, 1e-3, 1e-6).agree);  // 0.004 > 0.001
  // A bias ahead of a batch norm: rounding noise on both sides, relatively far apart but within
  // the absolute floor; with no floor it differs.
  const std::vector<float> bias{2e-8f, -1e-8f}, bias_b{-1e-8f, 2e-8f};
  w = weight_difference(bias_b, bias, 1e-2, 1e-6);
  EXPECT_NEAR(w.max_rel, 1.5, 1e-6);
  EXPECT_TRUE(w.agree);
  EXPECT_FALSE(weight_difference(bias_b, bias, 1e-2, 0).agree);
  // All zeros on both: equal. A NaN on either side differs whatever the tolerance.
  EXPECT_TRUE(weight_difference({0.f, 0.f}, {0.f, 0.f}, 0, 0).agree);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(weight_difference({0.5f, nan}, kernel, 1e9, 1e9).agree);
  EXPECT_FALSE(weight_difference(kernel, {nan, 0.5f, 0.f}, 1e9, 1e9).agree);
  // So does an infinity, even in the reference alone (its scale would accept anything).
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(weight_difference(kernel, {inf, -0.25f, 0.001f}, 1e-2, 1e-6).agree);
  EXPECT_FALSE(weight_difference({inf, -0.25f, 0.001f}, kernel, 1e9, 1e9).agree);
}

// The rounding baseline's nudge: every nonzero finite element exactly one ulp away, up for some
// and down for others, the same pattern for the same name; zeros and non-finite values kept.
TEST(RoundingBaseline, NudgesEachElementOneUlp) {
  std::vector<float> v(64, 0.75f);
  v[3] = 0;
  v[5] = std::numeric_limits<float>::infinity();
  std::vector<float> nudged = v, again = v, other = v;
  nudge_one_ulp("dense_1/kernel", &nudged);
  nudge_one_ulp("dense_1/kernel", &again);
  nudge_one_ulp("dense_1/bias", &other);
  EXPECT_EQ(nudged, again);
  EXPECT_NE(nudged, other);
  int up = 0, down = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 3 || i == 5) {
      EXPECT_EQ(nudged[i], v[i]) << i;
      continue;
    }
    const float above = std::nextafter(v[i], 2.f), below = std::nextafter(v[i], 0.f);
    ASSERT_TRUE(nudged[i] == above || nudged[i] == below) << i;
    (nudged[i] == above ? up : down)++;
  }
  EXPECT_GT(up, 10);
  EXPECT_GT(down, 10);

  // Pattern 0 is the default; another pattern draws other signs, still one ulp each.
  std::vector<float> zero = v, one = v;
  nudge_one_ulp("dense_1/kernel", &zero, 0);
  nudge_one_ulp("dense_1/kernel", &one, 1);
  EXPECT_EQ(zero, nudged);
  int flipped = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 3 || i == 5) continue;
    EXPECT_TRUE(one[i] == std::nextafter(v[i], 2.f) || one[i] == std::nextafter(v[i], 0.f)) << i;
    flipped += one[i] != zero[i];
  }
  EXPECT_GT(flipped, 10);
  EXPECT_LT(flipped, 52);
}

TEST(RoundingBaseline, RunningMaxKeepsTheDriftSoFar) {
  EXPECT_EQ(running_max({1e-6, 3e-6, 2e-6, 5e-6}), (std::vector<double>{1e-6, 3e-6, 3e-6, 5e-6}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> r = running_max({1e-6, nan, 2e-6});
  EXPECT_EQ(r[0], 1e-6);
  EXPECT_TRUE(std::isnan(r[1]) && std::isnan(r[2]));
}

// A loss more than 10x the first step's, or not finite, marks where training diverges.
TEST(DivergingStep, IsTheFirstLossTenTimesTheFirstStepsOrNotFinite) {
  EXPECT_EQ(first_diverging_step({2.30f, 2.29f, 22.9f, 2.2f}), -1);
  EXPECT_EQ(first_diverging_step({2.30f, 408.6f, 14.7f}), 1);
  EXPECT_EQ(first_diverging_step({2.30f, 2.0f, std::nanf("")}), 2);
  EXPECT_EQ(first_diverging_step({2.30f, 2.0f, 30.0f}, 20), -1);
  EXPECT_EQ(first_diverging_step({}), -1);
}

}  // namespace compare_numerics_test
}  // namespace tpusim::jobs
