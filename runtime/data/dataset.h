#pragma once
// A tf.data-like Dataset in C++: a chain of immutable dataset descriptions, each of which makes
// fresh iterators. Elements are named components (an Element maps name -> typed dense value).
//
//   auto ds = Dataset::list_files("/data/train-*", /*shuffle=*/true, /*seed=*/1)
//                 ->interleave_tfrecords({.cycle_length = 4, .parallel = true})
//                 ->shuffle(10000, /*seed=*/2)->repeat()
//                 ->map(parse_fn, /*num_parallel_calls=*/2)
//                 ->batch(128, /*drop_remainder=*/true)->prefetch(2);
//   auto it = ds->make_iterator();
//   while (auto e = it->next()) { if (!e->ok()) ...; if (!**e) break; use(***e); }
//
// Threads: map and batch with num_parallel_calls > 1, a parallel interleave and prefetch run
// real worker threads over bounded queues (a full queue blocks its producer: backpressure). An
// error in a worker reaches the consumer, with its context, in the position where the element would
// have been; after an error the iterator ends. Destroying an iterator early cancels and joins all
// of its threads.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/data/consumer_hold.h"
#include "runtime/data/example.h"
#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

using Element = std::map<std::string, FeatureValue>;

// Where a record came from, on the elements of a TFRecord source read with
// ReaderOptions::name_records: its file (bytes) and its number in the file and byte offset
// (int64s). map() takes both off an element before its function sees it.
inline constexpr char kRecordFile[] = "_record_file";
inline constexpr char kRecordPlace[] = "_record_place";

FeatureValue scalar_bytes(std::string b);
FeatureValue scalar_int(int64_t v);
// An image's float pixels as a [height, width, channels] value.
FeatureValue image_value(std::vector<float> pixels, int height, int width, int channels);

class Iterator {
 public:
  virtual ~Iterator() = default;
  // The next element; std::nullopt at the end; an error status ends the iteration.
  virtual absl::StatusOr<std::optional<Element>> next() = 0;
};

class Dataset;
class StageProfile;
using DatasetPtr = std::shared_ptr<const Dataset>;
using MapFn = std::function<absl::StatusOr<Element>(Element)>;
using ElementSource = std::function<std::unique_ptr<Iterator>(const Element&)>;

constexpr int kAutotune = -1;

struct InterleaveOptions {
  int cycle_length = 1;       // inputs open at once
  int block_length = 1;       // consecutive elements taken from each
  bool parallel = false;      // each open input read by its own thread
  bool deterministic = true;  // parallel only: false takes whichever input is ready first
  int buffer = 16;            // parallel only: elements read ahead per input
};

struct BatchOptions {
  bool drop_remainder = false;  // the last, short batch is dropped, else kept short
  // The last, short batch is padded with zero elements to the batch size and every batch gets a
  // "mask" component (float [B]: 1 real, 0 padding), the way TPUEstimator.predict runs a final
  // partial batch.
  bool pad_to_full = false;
  // Batches assembled at once, each by a worker thread of its own (tf.data's
  // batch(num_parallel_calls), map_and_batch's parallel copies); they come out in order. 1
  // assembles on the consumer's thread; kAutotune: the machine's cores.
  int num_parallel_calls = 1;
  // When set, each batch's assembly (stacking its rows, padding) is charged to `stage` of
  // `profile` (stage_profile.h), on whichever thread does it, with num_parallel_calls threads.
  std::shared_ptr<StageProfile> profile;
  std::string stage = "batch";
  // Batches the consumer holds besides these (consumer_hold.h): counted in the host-memory check
  // at the first element. batch() takes the declaration in scope when this one declares none.
  ConsumerHold consumer;
};

class Dataset : public std::enable_shared_from_this<Dataset> {
 public:
  virtual ~Dataset() = default;
  virtual std::unique_ptr<Iterator> make_iterator() const = 0;

  // Sources.
  // Files matching a glob pattern ("dir/train-*"), sorted, or shuffled with `seed`; each
  // element is {"filename": bytes}. No match is an error at the first next().
  static DatasetPtr list_files(const std::string& pattern, bool shuffle = false, uint64_t seed = 0);
  // The records of the files, in order; each element is {"record": bytes}.
  static DatasetPtr tfrecords(std::vector<std::string> files, ReaderOptions options = {});
  static DatasetPtr from_elements(std::vector<Element> elements);
  // 0, 1, ..., n-1 as {"value": int64}.
  static DatasetPtr range(int64_t n);

  // Transformations; each returns a new dataset and leaves this one as it was.
  // Each input element (a {"filename"} from list_files) opens a TFRecord file; records from
  // cycle_length files at a time are interleaved.
  DatasetPtr interleave_tfrecords(InterleaveOptions options, ReaderOptions reader = {}) const;
  DatasetPtr interleave(ElementSource source, InterleaveOptions options) const;
  // A buffer of `buffer_size` elements, a uniformly random one out at a time. With
  // reshuffle_each_iteration, each pass of a following repeat() (each new iterator) draws a new
  // order from seed + pass.
  DatasetPtr shuffle(int64_t buffer_size, uint64_t seed,
                     bool reshuffle_each_iteration = true) const;
  DatasetPtr repeat(int64_t count = -1) const;  // -1: forever
  // fn on every element; num_parallel_calls > 1 (or kAutotune: the machine's cores) runs it on
  // that many threads. deterministic keeps input order; false yields results as they finish.
  DatasetPtr map(MapFn fn, int num_parallel_calls = 1, bool deterministic = true) const;
  // Stacks `batch_size` elements: each component gets a leading batch dimension. Elements of
  // different components, types or shapes are an error naming the element and component.
  DatasetPtr batch(int64_t batch_size, BatchOptions options) const;
  DatasetPtr batch(int64_t batch_size, bool drop_remainder = false, bool pad_to_full = false) const;
  // A background thread keeps up to `buffer_size` elements ready (kAutotune: 2).
  DatasetPtr prefetch(int buffer_size) const;
  DatasetPtr take(int64_t count) const;
  DatasetPtr skip(int64_t count) const;
  // Adds {"index": int64 scalar} to each element: its position, counted from `start`
  // (tf.data's enumerate; after repeat() the count runs on across passes). An element that
  // already has an "index" is an error.
  DatasetPtr enumerate(int64_t start = 0) const;
  // Every num_shards-th element, starting at index (per-host input sharding).
  DatasetPtr shard(int64_t num_shards, int64_t index) const;
  // Charges the CPU time of producing each element (this dataset's chain up to the previous
  // profiled or threaded boundary) to `stage` of `profile` (stage_profile.h).
  DatasetPtr profiled(std::shared_ptr<StageProfile> profile, const std::string& stage,
                      int threads = 1) const;

 protected:
  DatasetPtr self() const { return shared_from_this(); }
};

// Reads every element of a dataset (for tests and small data); stops at the first error.
absl::StatusOr<std::vector<Element>> collect(const Dataset& dataset, int64_t limit = -1);

}  // namespace tpusim::runtime::data
