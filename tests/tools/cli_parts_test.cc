// The CLI's pure parts, linked straight into the test: the progress bar's text, the sweep's
// grid and its CSV, compare's weight agreement.

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/tpusim/compare_numerics.h"
#include "tools/tpusim/progress_bar.h"
#include "tools/tpusim/sweep_grid.h"
#include "tools/tpusim/sweep_table.h"

namespace tpusim::cli {
namespace {

using ::testing::HasSubstr;

TEST(ProgressBar, RendersTheFractionTheCountAndTheEta) {
  EXPECT_EQ(ProgressBar::render(0, 200, 0, 10), "[..........] 0/200 steps");
  EXPECT_EQ(ProgressBar::render(100, 200, 0.5, 10),
            "[#####.....] 100/200 steps  0.50 steps/s  ETA 3:20");
  EXPECT_EQ(ProgressBar::render(200, 200, 2, 10),
            "[##########] 200/200 steps  2.00 steps/s  ETA 0:00");
  // Resumed past the target (a model_dir already there) stays full.
  EXPECT_EQ(ProgressBar::render(250, 200, 0, 4), "[####] 250/200 steps");
}

TEST(ProgressBar, LogLinesPrintAboveTheBar) {
  std::ostringstream out;
  ProgressBar bar(out, 4);
  bar.line("first");  // no bar yet: the line alone
  bar.update(1, 4);
  bar.line("saved");
  bar.finish();
  EXPECT_EQ(out.str(),
            "\r\033[Kfirst\n"
            "\r\033[K[#...] 1/4 steps"
            "\r\033[Ksaved\n\r\033[K[#...] 1/4 steps"
            "\n");
}

TEST(SweepGrid, EveryCombinationLastAxisFastest) {
  auto a = parse_sweep_axis("chip.core.mxu_count=1,2");
  auto b = parse_sweep_axis("iterations_per_loop=10,50,100");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->config);
  EXPECT_FALSE(b->config);
  const auto points = sweep_points({*a, *b});
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].id, "p000");
  EXPECT_EQ(points[1].values, (std::vector<std::string>{"1", "50"}));
  EXPECT_EQ(points[5].values, (std::vector<std::string>{"2", "100"}));
  EXPECT_EQ(describe_point({*a, *b}, points[4]), "chip.core.mxu_count=2 iterations_per_loop=50");
  EXPECT_EQ(run_option_flag("iterations_per_loop"), "--iterations-per-loop");
}

TEST(SweepGrid, BadSpecsAreNamed) {
  for (const char* bad :
       {"mxu", "=1,2", "batch_size=", "batch_size=1,,2", "batch_size=1,", "bad field=1"}) {
    auto axis = parse_sweep_axis(bad);
    EXPECT_FALSE(axis.ok()) << bad;
    if (!axis.ok()) {
      EXPECT_THAT(std::string(axis.status().message()), HasSubstr(bad));
    }
  }
}

TEST(SweepTable, FlattensReportsIntoColumnsAndKeepsFailedPoints) {
  auto axis = parse_sweep_axis("batch_size=256,100");
  ASSERT_TRUE(axis.ok());
  const auto points = sweep_points({*axis});
  std::vector<SweepRow> rows(2);
  rows[0].point = points[0];
  set_report(
      &rows[0],
      nlohmann::ordered_json::parse(
          R"({"model": "mlp, small", "sim_seconds_per_step": 0.5, "analysis": {"step_seconds": 0.5,
          "step_breakdown": {"compute": 0.4, "idle": 0.1}, "advice": ["a"]}})"));
  rows[1].point = points[1];
  rows[1].exit_code = 1;
  EXPECT_EQ(report_columns(rows),
            (std::vector<std::string>{"model", "sim_seconds_per_step", "analysis.step_seconds",
                                      "analysis.step_breakdown.compute",
                                      "analysis.step_breakdown.idle"}));
  EXPECT_EQ(sweep_csv({*axis}, rows),
            "point,batch_size,exit_code,model,sim_seconds_per_step,analysis.step_seconds,"
            "analysis.step_breakdown.compute,analysis.step_breakdown.idle\n"
            "p000,256,0,\"mlp, small\",0.5,0.5,0.4,0.1\n"
            "p001,100,1,,,,,\n");
  EXPECT_DOUBLE_EQ(row_number(rows[0], "analysis.step_breakdown.compute"), 0.4);
  EXPECT_TRUE(std::isnan(row_number(rows[1], "sim_seconds_per_step")));
  EXPECT_TRUE(std::isnan(row_number(rows[0], "model")));
}

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

}  // namespace
}  // namespace tpusim::cli
