// The host-side metrics against hand-counted answers.
#include "estimator/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::estimator::metrics {
namespace {

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

TEST(Metrics, MismatchedTensorsAreRefused) {
  const auto r =
      accuracy(HostTensor::from_ints({2}, {1, 0}), HostTensor::from_ints({3}, {1, 0, 1}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("2 labels but 3 predictions"));
  EXPECT_FALSE(mean(HostTensor::from({0}, {})).ok());
}

}  // namespace
}  // namespace tpusim::estimator::metrics
