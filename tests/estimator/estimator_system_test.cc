// TPUEstimator.train on a simulated v3-8: CrossShardOptimizer over 8 cores through the
// interconnect, simulated time and infeed waits reported, and resume bitwise exact. One System per
// process (one test per process).
#include <gtest/gtest.h>

#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "tests/configs/config_test_util.h"
#include "tests/estimator/estimator_test_util.h"

namespace tpusim::estimator {
namespace estimator_system_test {

using config::testing::TempDir;
using runtime::OptimizerSpec;
using namespace testing;

absl::StatusOr<TrainResult> train_on_tpusim(const std::string& dir, int64_t steps) {
  auto est = create_quiet(linear_model(OptimizerSpec::Kind::kAdam), quiet_run(dir, "tpusim", 8), 64,
                          64, 64);
  if (!est.ok()) return est.status();
  return (*est)->train(train_input(), steps);
}

TEST(EstimatorOnTpusim, TrainsOnEveryCoreAndResumesBitwise) {
  TempDir once, twice;
  auto a = train_on_tpusim(once.path().string(), 20);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_LT(a->final_loss, a->losses.front());
  EXPECT_GT(a->sim_seconds, 0);
  // Each of the 4 loops of 5 steps pays the host's 2 ms round trip.
  EXPECT_GT(a->sim_seconds, 4 * 2e-3);
  EXPECT_GT(a->infeed_wait_fraction, 0);
  EXPECT_LT(a->infeed_wait_fraction, 1);
  auto b1 = train_on_tpusim(twice.path().string(), 10);
  ASSERT_TRUE(b1.ok()) << b1.status();
  auto b2 = train_on_tpusim(twice.path().string(), 20);
  ASSERT_TRUE(b2.ok()) << b2.status();
  EXPECT_EQ(b2->steps_run, 10);
  EXPECT_EQ(a->weights_fingerprint, b2->weights_fingerprint);
}

// The same steps on cpu (mxu precision: the same bf16 products) and on tpusim end close.
TEST(EstimatorOnTpusim, FollowsTheCpuBackend) {
  TempDir on_tpu, on_cpu;
  auto t = train_on_tpusim(on_tpu.path().string(), 10);
  ASSERT_TRUE(t.ok()) << t.status();
  QuietRun c = quiet_run(on_cpu.path().string(), "cpu", 8);
  c.sim.compile.precision = runtime::Precision::kMxu;
  auto est = create_quiet(linear_model(OptimizerSpec::Kind::kAdam), c, 64, 64, 64);
  ASSERT_TRUE(est.ok());
  auto r = (*est)->train(train_input(), 10);
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t s = 0; s < 10; ++s) EXPECT_NEAR(t->losses[s], r->losses[s], 1e-5) << "step " << s;
}

// The seed's MNIST CNN learns on Fashion-MNIST on the simulated slice within a short budget: 12
// steps of 2 x 16 images.
TEST(EstimatorOnTpusim, MnistCnnLossFalls) {
  TempDir dir;
  auto r = train_mnist_cnn_briefly(dir.path().string(), "tpusim");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto [first, last] = loss_ends(r->losses, 3);
  EXPECT_LT(last, first * 0.8) << "first " << first << " last " << last;
  EXPECT_GT(r->mxu_utilization, 0);
}

}  // namespace estimator_system_test
}  // namespace tpusim::estimator
