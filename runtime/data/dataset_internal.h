#pragma once
// Shared between dataset.cc and dataset_parallel.cc.

#include "runtime/data/dataset.h"

namespace tpusim::runtime::data {

// An iterator that yields `status` once, then ends.
std::unique_ptr<Iterator> error_iterator(absl::Status status);

// A dataset whose iterators fail with `status`: how a transformation with bad arguments reports
// them (at the first next(), with the message).
class FailingDataset final : public Dataset {
 public:
  explicit FailingDataset(absl::Status status) : status_(std::move(status)) {}
  std::unique_ptr<Iterator> make_iterator() const override { return error_iterator(status_); }

 private:
  absl::Status status_;
};

}  // namespace tpusim::runtime::data
