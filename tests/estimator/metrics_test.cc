// The host-side metrics against hand-counted answers.
#include "estimator/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::estimator::metrics {
namespace metrics_test {

using runtime::HostTensor;

TEST(Metrics, CountLikeTensorFlow) {
  const HostTensor labels = HostTensor::from_ints({6}, {1, 0, 1, 1, 0, 2});
  const HostTensor predicted = HostTensor::from({6}, {1, 1, 0, 1, 0, 2});  // integral floats
  EXPECT_DOUBLE_EQ(*accuracy(labels, predicted), 4.0 / 6);
  // Class 1: TP = 2 (rows 0, 3), FP = 1 (row 1), FN = 1 (row 2).
  EXPECT_DOUBLE_EQ(*precision(labels, predicted), 2.0 / 3);
  EXPECT_DOUBLE_EQ(*recall(labels, predicted), 2.0 / 3);
  EXPECT_DOUBLE_EQ(*precision(labels, predicted, 2), 1.0);
  EXPECT_DOUBLE_EQ(*recall(labels, predicted, 7), 0.0);  // no positives: 0, not NaN
  EXPECT_DOUBLE_EQ(*mean(HostTensor::from({2, 2}, {1, 2, 3, 6})), 3.0);
}

// tf.metrics.accuracy and mean with weights (run_pretraining's masked_lm_weights): padding rows
// of weight 0 count for nothing; all-zero weights give 0, not NaN.
TEST(Metrics, WeightsCountLikeTensorFlow) {
  const HostTensor labels = HostTensor::from_ints({4}, {5, 7, 9, 0});
  const HostTensor predicted = HostTensor::from_ints({4}, {5, 1, 9, 3});
  const HostTensor weights = HostTensor::from({4}, {1, 1, 0.5f, 0});
  EXPECT_DOUBLE_EQ(*accuracy(labels, predicted, &weights), 1.5 / 2.5);
  EXPECT_DOUBLE_EQ(*mean(HostTensor::from({4}, {2, 4, 8, 100}), &weights), 10.0 / 2.5);
  const HostTensor none = HostTensor::from({4}, {0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(*accuracy(labels, predicted, &none), 0.0);
  EXPECT_DOUBLE_EQ(*mean(HostTensor::from({4}, {1, 2, 3, 4}), &none), 0.0);
  const HostTensor three = HostTensor::from({3}, {1, 1, 1});
  const auto bad = accuracy(labels, predicted, &three);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("3 weights for 4 values"));
  EXPECT_FALSE(mean(HostTensor::from({4}, {1, 2, 3, 4}), &three).ok());
}

TEST(Metrics, MismatchedTensorsAreRefused) {
  const auto r =
      accuracy(HostTensor::from_ints({2}, {1, 0}), HostTensor::from_ints({3}, {1, 0, 1}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("2 labels but 3 predictions"));
  EXPECT_FALSE(mean(HostTensor::from({0}, {})).ok());
}

}  // namespace metrics_test
}  // namespace tpusim::estimator::metrics
