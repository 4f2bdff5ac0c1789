#pragma once
// Host-side metrics for metric_fn (tf.compat.v1.metrics), over whole evaluations: the tensors
// every eval step outfeeds, stacked. Labels and predictions are class indices (s32 or integral
// f32), one per example; weights, when given, are 0 or positive per example.

#include <absl/status/statusor.h>

#include "runtime/graph/tensor.h"

namespace tpusim::estimator::metrics {

// Fraction of examples whose prediction equals the label; with `weights` (one per example), the
// weighted fraction sum(w * right) / sum(w), 0 when the weights sum to 0 (tf.metrics.accuracy).
absl::StatusOr<double> accuracy(const runtime::HostTensor& labels,
                                const runtime::HostTensor& predictions,
                                const runtime::HostTensor* weights = nullptr);
// The mean of every element; with `weights`, sum(w * v) / sum(w), 0 when the weights sum to 0
// (tf.metrics.mean).
absl::StatusOr<double> mean(const runtime::HostTensor& values,
                            const runtime::HostTensor* weights = nullptr);
// Binary precision and recall for class `positive`: TP / (TP + FP) and TP / (TP + FN) (0 when
// the denominator is 0, as TensorFlow's metrics return).
absl::StatusOr<double> precision(const runtime::HostTensor& labels,
                                 const runtime::HostTensor& predictions, int positive = 1);
absl::StatusOr<double> recall(const runtime::HostTensor& labels,
                              const runtime::HostTensor& predictions, int positive = 1);

}  // namespace tpusim::estimator::metrics
