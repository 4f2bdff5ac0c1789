// tpusim validate's cases and their runs (estimator/jobs/validation.h).
#include "estimator/jobs/validation.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::jobs {
namespace validation_test {

// Every case is a measured MLPerf Training row, the step each published: ResNet-50 at 229 and
// 137 ms on v2-8 and v3-8 (v0.5), 131 ms on v3-32 and 25.2 on v3-2048 (v0.6), 73.6 on v4-16
// (v0.7 research) and 37.1 on v4-128 (v1.0); BERT-Large at 512 at 460 ms on v3-32 (v0.7) and
// 233 on v4-16 (v0.7 research).
TEST(ValidateCases, EveryCaseIsAMeasuredMlperfRow) {
  const auto& cases = validation_cases();
  const std::vector<std::pair<std::string, double>> steps = {
      {"resnet50-v2-8", 0.229},        {"resnet50-v3-8", 0.137},       {"resnet50-v3-32", 0.131},
      {"resnet50-v4-16", 0.0736},      {"resnet50-v4-128", 0.0371},    {"resnet50-v3-2048", 0.0252},
      {"bert_large-512-v3-32", 0.460}, {"bert_large-512-v4-16", 0.233}};
  ASSERT_EQ(cases.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(cases[i].name, steps[i].first);
    ASSERT_GT(cases[i].measured_examples_per_second, 0) << cases[i].name;
    EXPECT_NEAR(cases[i].global_batch / cases[i].measured_examples_per_second, steps[i].second,
                0.0005)
        << cases[i].name;
    EXPECT_NE(cases[i].source.find("MLPerf Training"), std::string::npos) << cases[i].name;
  }
  for (const auto& c : cases) {
    EXPECT_GT(c.global_batch, 0) << c.name;
    EXPECT_FALSE(c.source.empty()) << c.name;
  }
  EXPECT_EQ(validation_case_pending(cases[1]), "");
  EXPECT_NEAR(step_time_error(0.4134, 0.137), 2.0175, 1e-3);
  EXPECT_NEAR(step_time_error(0.137, 0.137), 0, 1e-12);
}

// A case's run, on a model small enough for a test: mlp on v3-8 at global batch 64, one step,
// timing-only. The prediction is the simulated step, and examples/s follow from it.
TEST(ValidateCases, ACaseRunsTimingOnlyAndReportsItsStep) {
  const ValidationCase c{"mlp-v3-8", "mlp", "v3-8", 64, 0, "test"};
  std::vector<std::string> lines;
  auto r = run_validation_case(c, 1, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->step_seconds, 0);
  EXPECT_DOUBLE_EQ(r->examples_per_second, 64 / r->step_seconds);
  EXPECT_GT(r->mxu_utilization, 0);
  EXPECT_FALSE(r->steady_state);  // one step: the loop's own
  EXPECT_EQ(r->step_seconds, r->loop_step_seconds);
  EXPECT_FALSE(lines.empty());
}

// The steady state leaves out a loop's first step (its batch crossing the link) and its last
// (the loop's host round trip); with fewer than 3 steps there is none.
TEST(ValidateCases, TheSteadyStateIsTheMeanOfTheStepsBetweenTheFirstAndTheLast) {
  std::vector<traces::StepBreakdown> steps(4);
  const double seconds[] = {0.150, 0.142, 0.146, 0.149};
  for (size_t i = 0; i < steps.size(); ++i) steps[i].seconds = seconds[i];
  EXPECT_DOUBLE_EQ(*steady_step_seconds(steps), (0.142 + 0.146) / 2);
  steps.resize(3);
  EXPECT_DOUBLE_EQ(*steady_step_seconds(steps), 0.142);
  steps.resize(2);
  EXPECT_FALSE(steady_step_seconds(steps).has_value());
}

TEST(ValidateCases, FourStepsPredictTheSteadyState) {
  const ValidationCase c{"mlp-v3-8", "mlp", "v3-8", 64, 0, "test"};
  auto r = run_validation_case(c, 4, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->steady_state);
  // The loop's average carries its first step's fill and its round trip; the steady state not.
  EXPECT_LT(r->step_seconds, r->loop_step_seconds);
  EXPECT_DOUBLE_EQ(r->examples_per_second, 64 / r->step_seconds);
}

TEST(ValidateCases, ACaseWhoseModelIsNotInTheZooIsPending) {
  const ValidationCase c{"x", "bert_huge", "v3-8", 8, 0, "test"};
  EXPECT_EQ(validation_case_pending(c), "model 'bert_huge' is not in the zoo yet");
  auto r = run_validation_case(c, 1, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace validation_test
}  // namespace tpusim::jobs
