#include "estimator/metrics.h"

#include <cmath>

#include "common/strings.h"

namespace tpusim::estimator::metrics {
namespace {

using runtime::DType;
using runtime::HostTensor;

double at(const HostTensor& t, size_t i) {
  return t.dtype == DType::kS32 ? static_cast<double>(t.i[i]) : static_cast<double>(t.f[i]);
}

absl::Status same_count(const HostTensor& labels, const HostTensor& predictions) {
  if (labels.elements() != predictions.elements() || labels.elements() == 0) {
    return absl::InvalidArgumentError(
        str_cat("metrics: ", labels.elements(), " labels but ", predictions.elements(),
                " predictions (each must hold one class per example, and at least one)"));
  }
  return absl::OkStatus();
}

// One weight per value, when there are weights.
absl::Status weights_fit(const HostTensor& values, const HostTensor* weights) {
  if (weights == nullptr || weights->elements() == values.elements()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      str_cat("metrics: ", weights->elements(), " weights for ", values.elements(), " values"));
}

double weight(const HostTensor* weights, size_t i) {
  return weights != nullptr ? at(*weights, i) : 1.0;
}

struct Confusion {
  double tp = 0, fp = 0, fn = 0;
};

absl::StatusOr<Confusion> confusion(const HostTensor& labels, const HostTensor& predictions,
                                    int positive) {
  if (auto s = same_count(labels, predictions); !s.ok()) return s;
  Confusion c;
  for (size_t i = 0; i < static_cast<size_t>(labels.elements()); ++i) {
    const bool label = std::lround(at(labels, i)) == positive;
    const bool predicted = std::lround(at(predictions, i)) == positive;
    c.tp += label && predicted;
    c.fp += !label && predicted;
    c.fn += label && !predicted;
  }
  return c;
}

}  // namespace

absl::StatusOr<double> accuracy(const HostTensor& labels, const HostTensor& predictions,
                                const HostTensor* weights) {
  if (auto s = same_count(labels, predictions); !s.ok()) return s;
  if (auto s = weights_fit(labels, weights); !s.ok()) return s;
  double right = 0, total = 0;
  for (size_t i = 0; i < static_cast<size_t>(labels.elements()); ++i) {
    const double w = weight(weights, i);
    right += w * (std::lround(at(labels, i)) == std::lround(at(predictions, i)));
    total += w;
  }
  return total > 0 ? right / total : 0.0;
}

absl::StatusOr<double> mean(const HostTensor& values, const HostTensor* weights) {
  if (values.elements() == 0) return absl::InvalidArgumentError("metrics: mean of nothing");
  if (auto s = weights_fit(values, weights); !s.ok()) return s;
  double sum = 0, total = 0;
  for (size_t i = 0; i < static_cast<size_t>(values.elements()); ++i) {
    const double w = weight(weights, i);
    sum += w * at(values, i);
    total += w;
  }
  return total > 0 ? sum / total : 0.0;
}

absl::StatusOr<double> precision(const HostTensor& labels, const HostTensor& predictions,
                                 int positive) {
  auto c = confusion(labels, predictions, positive);
  if (!c.ok()) return c.status();
  return c->tp + c->fp > 0 ? c->tp / (c->tp + c->fp) : 0.0;
}

absl::StatusOr<double> recall(const HostTensor& labels, const HostTensor& predictions,
                              int positive) {
  auto c = confusion(labels, predictions, positive);
  if (!c.ok()) return c.status();
  return c->tp + c->fn > 0 ? c->tp / (c->tp + c->fn) : 0.0;
}

}  // namespace tpusim::estimator::metrics
