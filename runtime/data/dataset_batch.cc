// Dataset::batch: stacking elements into batches on the consumer's thread, or on worker threads
// (num_parallel_calls), with each batch's assembly charged to a stage profile when asked.
#include <algorithm>

#include "common/host_budget.h"
#include "common/strings.h"
#include "runtime/data/dataset.h"
#include "runtime/data/dataset_internal.h"
#include "runtime/data/example.h"
#include "runtime/data/stage_profile.h"

namespace tpusim::runtime::data {
namespace {

// A value of the same type and shape with every entry zero (empty strings for bytes).
FeatureValue zeros_like(const FeatureValue& v) {
  FeatureValue z;
  z.type = v.type;
  z.shape = v.shape;
  z.bytes.resize(v.bytes.size());
  z.floats.resize(v.floats.size());
  z.ints.resize(v.ints.size());
  return z;
}

absl::StatusOr<Element> stack(std::vector<Element>& rows, int64_t batch_size, bool pad) {
  const int64_t real = static_cast<int64_t>(rows.size());
  Element out;
  const Element& first = rows.front();
  for (const auto& [name, v] : first) {
    FeatureValue b;
    b.type = v.type;
    b.shape.push_back(pad ? batch_size : real);
    b.shape.insert(b.shape.end(), v.shape.begin(), v.shape.end());
    // One allocation per component: growing a multi-MiB batch by doubling costs copies and
    // fresh pages each time.
    const auto rows_out = static_cast<size_t>(pad ? batch_size : real);
    b.bytes.reserve(v.bytes.size() * rows_out);
    b.floats.reserve(v.floats.size() * rows_out);
    b.ints.reserve(v.ints.size() * rows_out);
    out.emplace(name, std::move(b));
  }
  for (int64_t r = 0; r < real; ++r) {
    if (rows[r].size() != first.size()) {
      return absl::InvalidArgumentError(str_cat("batch: element ", r, " has ", rows[r].size(),
                                                " components, element 0 has ", first.size()));
    }
    for (auto& [name, v] : rows[r]) {
      auto it = out.find(name);
      const FeatureValue& f = first.at(name);
      if (it == out.end() || v.type != f.type || v.shape != f.shape) {
        return absl::InvalidArgumentError(
            str_cat("batch: element ", r, "'s '", name, "' is ", feature_type_name(v.type),
                    shape_string(v.shape), ", element 0's is ", feature_type_name(f.type),
                    shape_string(f.shape), " (batch needs equal shapes)"));
      }
      FeatureValue& b = it->second;
      b.bytes.insert(b.bytes.end(), std::make_move_iterator(v.bytes.begin()),
                     std::make_move_iterator(v.bytes.end()));
      b.floats.insert(b.floats.end(), v.floats.begin(), v.floats.end());
      b.ints.insert(b.ints.end(), v.ints.begin(), v.ints.end());
    }
  }
  if (pad) {
    for (auto& [name, b] : out) {
      const FeatureValue z = zeros_like(first.at(name));
      for (int64_t r = real; r < batch_size; ++r) {
        b.bytes.insert(b.bytes.end(), z.bytes.begin(), z.bytes.end());
        b.floats.insert(b.floats.end(), z.floats.begin(), z.floats.end());
        b.ints.insert(b.ints.end(), z.ints.begin(), z.ints.end());
      }
    }
    FeatureValue mask;
    mask.type = FeatureType::kFloat;
    mask.shape = {batch_size};
    mask.floats.assign(static_cast<size_t>(batch_size), 0.0F);
    std::fill(mask.floats.begin(), mask.floats.begin() + real, 1.0F);
    out["mask"] = std::move(mask);
  }
  return out;
}

// The batch's input, checked against the host's memory budget at its first element: `batches`
// batches of `size` such elements in flight, each held twice while it is stacked (its rows and
// the batch), and the batches its consumer holds besides, must fit, or the iteration ends with
// ResourceExhausted before a second element is drawn (a batch size a flag makes absurd is refused
// in milliseconds, not after the host's memory has gone: docs/reliability.md, "Budgets").
class BudgetedRows final : public Iterator {
 public:
  BudgetedRows(std::unique_ptr<Iterator> in, int64_t size, int64_t batches, ConsumerHold consumer)
      : in_(std::move(in)), size_(size), batches_(batches), consumer_(std::move(consumer)) {}
  Next next() override {
    auto e = in_->next();
    if (checked_ || !e.ok() || !e->has_value()) return e;
    checked_ = true;
    if (auto s = check(element_bytes(**e)); !s.ok()) return s;
    return e;
  }

 private:
  absl::Status check(uint64_t one) const {
    const uint64_t batch = saturating_product(one, static_cast<uint64_t>(size_));
    const uint64_t held =
        saturating_sum(saturating_product(batch, 2 * static_cast<uint64_t>(batches_)),
                       saturating_product(batch, consumer_.batches));
    std::string what =
        str_cat("batch: ", batches_, " batch", batches_ == 1 ? "" : "es", " in flight of ", size_,
                " elements of ", byte_size(one), ", each held twice while stacked,");
    if (consumer_.batches > 0) {
      what = str_cat("batch: ", consumer_.what, " (", consumer_.batches, " batches of ", size_,
                     " elements of ", byte_size(one), ") and ", batches_, " batch",
                     batches_ == 1 ? "" : "es", " in flight, each held twice while stacked,");
    }
    return check_host_memory(what, held);
  }

  std::unique_ptr<Iterator> in_;
  int64_t size_, batches_;
  ConsumerHold consumer_;
  bool checked_ = false;
};

// One batch of `rows`, the input's next elements (up to the batch size; `input_ended` when the
// input ended after them), its assembly charged to `stage` of the options' profile; nullopt when
// there is no batch to give (no rows, or a short last batch dropped).
std::optional<Next> assemble(std::vector<Element>& rows, bool input_ended, int64_t size,
                             const BatchOptions& o, size_t stage) {
  const auto n = static_cast<int64_t>(rows.size());
  if (n == 0 || (input_ended && o.drop_remainder && n < size)) return std::nullopt;
  std::optional<StageRegion> region;
  if (o.profile != nullptr) {
    region.emplace(*o.profile, stage);
    region->count_element();
  }
  auto b = stack(rows, size, o.pad_to_full);
  if (!b.ok()) return Next(b.status());
  return Next(std::optional<Element>(std::move(*b)));
}

// Sequential: the consumer's next() draws the rows and assembles them.
class BatchIterator final : public Iterator {
 public:
  BatchIterator(std::unique_ptr<Iterator> in, int64_t size, BatchOptions o, size_t stage)
      : in_(std::move(in)), size_(size), o_(std::move(o)), stage_(stage) {}
  Next next() override {
    if (done_) return kEnd;
    std::vector<Element> rows;
    while (static_cast<int64_t>(rows.size()) < size_) {
      auto e = in_->next();
      if (!e.ok()) {
        done_ = true;  // an error ends the iteration
        return e.status();
      }
      if (!e->has_value()) {
        done_ = true;
        break;
      }
      rows.push_back(std::move(**e));
    }
    std::optional<Next> b = assemble(rows, done_, size_, o_, stage_);
    if (!b.has_value()) return kEnd;  // the input has ended
    if (!b->ok()) done_ = true;
    return std::move(*b);
  }

 private:
  std::unique_ptr<Iterator> in_;
  int64_t size_;
  BatchOptions o_;
  size_t stage_;
  bool done_ = false;
};

// Parallel: a job is one batch's rows, drawn in order and assembled by a worker.
ParallelWork batch_work(int64_t size, BatchOptions o, size_t stage) {
  return [size, o = std::move(o), stage](std::vector<Next> items, int64_t) {
    std::vector<Next> out;
    std::vector<Element> rows;
    rows.reserve(items.size());
    bool ended = false;
    for (Next& item : items) {
      if (!item.ok()) {  // an error ends the iteration, as it does the sequential batch's
        out.push_back(std::move(item));
        return out;
      }
      if (!item->has_value()) {
        ended = true;
        break;
      }
      rows.push_back(std::move(**item));
    }
    if (std::optional<Next> b = assemble(rows, ended, size, o, stage)) out.push_back(std::move(*b));
    if (ended) out.push_back(kEnd);
    return out;
  };
}

class Batch final : public Dataset {
 public:
  Batch(DatasetPtr input, int64_t size, BatchOptions o, size_t stage)
      : input_(std::move(input)), size_(size), o_(std::move(o)), stage_(stage) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    const int64_t in_flight = std::max<int64_t>(1, o_.num_parallel_calls);
    auto rows =
        std::make_unique<BudgetedRows>(input_->make_iterator(), size_, in_flight, o_.consumer);
    if (o_.num_parallel_calls <= 1)
      return std::make_unique<BatchIterator>(std::move(rows), size_, o_, stage_);
    // As tf.data's parallel batch: num_parallel_calls batches in flight at most.
    return parallel_jobs(std::move(rows), batch_work(size_, o_, stage_), o_.num_parallel_calls,
                         size_, o_.num_parallel_calls,
                         /*deterministic=*/true);
  }

 private:
  DatasetPtr input_;
  int64_t size_;
  BatchOptions o_;
  size_t stage_;  // in o_.profile, when there is one
};

}  // namespace

DatasetPtr Dataset::batch(int64_t batch_size, BatchOptions options) const {
  if (options.num_parallel_calls == kAutotune) options.num_parallel_calls = machine_threads();
  if (options.consumer.batches == 0) options.consumer = ScopedConsumerHold::current();
  if (batch_size < 1 || options.num_parallel_calls < 1) {
    return std::make_shared<FailingDataset>(absl::InvalidArgumentError(str_cat(
        "batch: batch_size ", batch_size, " and num_parallel_calls ", options.num_parallel_calls,
        " must be at least 1 (num_parallel_calls may also be "
        "kAutotune)")));
  }
  const size_t stage = options.profile != nullptr
                           ? options.profile->declare(options.stage, options.num_parallel_calls)
                           : 0;
  return std::make_shared<Batch>(self(), batch_size, std::move(options), stage);
}

DatasetPtr Dataset::batch(int64_t batch_size, bool drop_remainder, bool pad_to_full) const {
  BatchOptions options;
  options.drop_remainder = drop_remainder;
  options.pad_to_full = pad_to_full;
  return batch(batch_size, std::move(options));
}

}  // namespace tpusim::runtime::data
