// tpusim validate's cases and their runs (estimator/jobs/validation.h).
#include "estimator/jobs/validation.h"

#include <gtest/gtest.h>

namespace tpusim::jobs {
namespace validation_test {

// The two measured cases are MLPerf Training v0.5's ResNet-50 rows: 4,473 and 7,459 images/s at
// global batch 1024 on v2-8 and v3-8 (229 and 137 ms a step).
TEST(ValidateCases, TheMeasuredCasesAreTheMlperfResNet50Rows) {
  const auto& cases = validation_cases();
  ASSERT_GE(cases.size(), 2u);
  EXPECT_EQ(cases[0].name, "resnet50-v2-8");
  EXPECT_EQ(cases[0].global_batch, 1024);
  EXPECT_NEAR(1024 / cases[0].measured_examples_per_second, 0.229, 0.0005);
  EXPECT_EQ(cases[1].name, "resnet50-v3-8");
  EXPECT_NEAR(1024 / cases[1].measured_examples_per_second, 0.137, 0.0005);
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
  EXPECT_FALSE(lines.empty());
}

TEST(ValidateCases, ACaseWhoseModelIsNotInTheZooIsPending) {
  const ValidationCase c{"x", "bert_huge", "v3-8", 8, 0, "test"};
  EXPECT_EQ(validation_case_pending(c), "model 'bert_huge' is not in the zoo yet");
  auto r = run_validation_case(c, 1, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace validation_test
}  // namespace tpusim::jobs
