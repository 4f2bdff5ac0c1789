// Sources and the sequential transformations of Dataset; batch is in dataset_batch.cc and the
// threaded ones (parallel map, interleave, prefetch) in dataset_parallel.cc.
#include "runtime/data/dataset.h"

#include <algorithm>
#include <atomic>
#include <random>

#include <glob.h>

#include "common/host_budget.h"
#include "common/strings.h"
#include "runtime/data/dataset_internal.h"

namespace tpusim::runtime::data {

uint64_t element_bytes(const Element& e) {
  uint64_t bytes = 0;
  for (const auto& [name, v] : e) {
    bytes += name.size() + v.floats.size() * sizeof(float) + v.ints.size() * sizeof(int64_t);
    for (const std::string& s : v.bytes) bytes += sizeof(std::string) + s.size();
  }
  return bytes;
}

FeatureValue scalar_bytes(std::string b) {
  FeatureValue v;
  v.type = FeatureType::kBytes;
  v.bytes.push_back(std::move(b));
  return v;
}

FeatureValue scalar_int(int64_t x) {
  FeatureValue v;
  v.type = FeatureType::kInt64;
  v.ints.push_back(x);
  return v;
}

FeatureValue image_value(std::vector<float> pixels, int height, int width, int channels) {
  FeatureValue v;
  v.type = FeatureType::kFloat;
  v.shape = {height, width, channels};
  v.floats = std::move(pixels);
  return v;
}

namespace {

// An iterator over a vector of elements it owns.
class VectorIterator final : public Iterator {
 public:
  explicit VectorIterator(std::vector<Element> elements) : elements_(std::move(elements)) {}
  Next next() override {
    if (i_ >= elements_.size()) return kEnd;
    return std::optional<Element>(elements_[i_++]);
  }

 private:
  std::vector<Element> elements_;
  size_t i_ = 0;
};

class ErrorIterator final : public Iterator {
 public:
  explicit ErrorIterator(absl::Status s) : status_(std::move(s)) {}
  Next next() override {
    if (done_) return kEnd;
    done_ = true;
    return status_;
  }

 private:
  absl::Status status_;
  bool done_ = false;
};

class FromElements final : public Dataset {
 public:
  explicit FromElements(std::vector<Element> e) : elements_(std::move(e)) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    return std::make_unique<VectorIterator>(elements_);
  }

 private:
  std::vector<Element> elements_;
};

class RangeDataset final : public Dataset {
 public:
  explicit RangeDataset(int64_t n) : n_(n) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    class It final : public Iterator {
     public:
      explicit It(int64_t n) : n_(n) {}
      Next next() override {
        if (i_ >= n_) return kEnd;
        return std::optional<Element>(Element{{"value", scalar_int(i_++)}});
      }

     private:
      int64_t n_, i_ = 0;
    };
    return std::make_unique<It>(n_);
  }

 private:
  int64_t n_;
};

class ListFiles final : public Dataset {
 public:
  ListFiles(std::string pattern, bool shuffle, uint64_t seed)
      : pattern_(std::move(pattern)), shuffle_(shuffle), seed_(seed) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    glob_t g{};
    const int rc = ::glob(pattern_.c_str(), 0, nullptr, &g);
    std::vector<std::string> files(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    if (rc == GLOB_NOMATCH || files.empty()) {
      return std::make_unique<ErrorIterator>(
          absl::NotFoundError(str_cat("list_files: no file matches ", pattern_)));
    }
    if (rc != 0)
      return std::make_unique<ErrorIterator>(
          absl::InternalError(str_cat("list_files: glob failed on ", pattern_)));
    std::sort(files.begin(), files.end());
    if (shuffle_) {
      std::mt19937_64 rng(seed_ + epoch_.fetch_add(1));  // a new order each pass, as tf.data
      std::shuffle(files.begin(), files.end(), rng);
    }
    std::vector<Element> elements;
    for (auto& f : files) elements.push_back(Element{{"filename", scalar_bytes(std::move(f))}});
    return std::make_unique<VectorIterator>(std::move(elements));
  }

 private:
  std::string pattern_;
  bool shuffle_;
  uint64_t seed_;
  mutable std::atomic<uint64_t> epoch_{0};
};

class TFRecordIterator final : public Iterator {
 public:
  TFRecordIterator(std::vector<std::string> files, ReaderOptions options)
      : files_(std::move(files)), options_(options) {}
  Next next() override {
    for (;;) {
      if (reader_ == nullptr) {
        if (file_ >= files_.size()) return kEnd;
        auto r = TFRecordReader::open(files_[file_++], options_);
        if (!r.ok()) return fail(r.status());
        reader_ = std::move(*r);
      }
      std::string record;
      const uint64_t number = reader_->records(), offset = reader_->offset();
      auto more = reader_->next(&record);
      if (!more.ok()) return fail(more.status());  // names the file and offset
      if (*more) {
        Element e{{"record", scalar_bytes(std::move(record))}};
        if (options_.name_records) {
          e[kRecordFile] = scalar_bytes(reader_->path());
          FeatureValue place;
          place.type = FeatureType::kInt64;
          place.ints = {static_cast<int64_t>(number), static_cast<int64_t>(offset)};
          e[kRecordPlace] = std::move(place);
        }
        return std::optional<Element>(std::move(e));
      }
      reader_.reset();
    }
  }

 private:
  Next fail(absl::Status s) {
    reader_.reset();
    file_ = files_.size();  // an error ends the iteration
    return s;
  }
  std::vector<std::string> files_;
  ReaderOptions options_;
  size_t file_ = 0;
  std::unique_ptr<TFRecordReader> reader_;
};

class TFRecords final : public Dataset {
 public:
  TFRecords(std::vector<std::string> files, ReaderOptions options)
      : files_(std::move(files)), options_(options) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    return std::make_unique<TFRecordIterator>(files_, options_);
  }

 private:
  std::vector<std::string> files_;
  ReaderOptions options_;
};

// The buffer's bytes are held against the host's memory budget as it fills: each time they
// double (from 1 MiB), as many again must fit in what the budget has left, or the iteration
// ends with ResourceExhausted naming the buffer and both sizes. A buffer of 10,000 records whose
// size nothing bounds (a JPEG's follows its photo) is refused before it takes the host's memory.
class ShuffleBuffer final : public Iterator {
 public:
  ShuffleBuffer(std::unique_ptr<Iterator> in, size_t cap, uint64_t seed)
      : in_(std::move(in)), cap_(cap), rng_(seed) {}
  Next next() override {
    while (!input_done_ && buf_.size() < cap_) {
      auto e = in_->next();
      if (e.ok() && e->has_value()) e = hold(std::move(e));
      if (!e.ok()) {
        input_done_ = true;
        buf_.clear();  // an error ends the iteration
        return e.status();
      }
      if (!e->has_value()) {
        input_done_ = true;
        break;
      }
      buf_.push_back(std::move(**e));
    }
    if (buf_.empty()) return kEnd;
    const size_t pick = std::uniform_int_distribution<size_t>(0, buf_.size() - 1)(rng_);
    std::swap(buf_[pick], buf_.back());
    Element out = std::move(buf_.back());
    buf_.pop_back();
    held_ -= std::min(held_, element_bytes(out));
    return std::optional<Element>(std::move(out));
  }

 private:
  static constexpr uint64_t kFirstCheck = uint64_t{1} << 20;

  Next hold(Next e) {
    held_ = saturating_sum(held_, element_bytes(**e));
    if (held_ < next_check_) return e;
    next_check_ = saturating_product(held_, 2);
    // Under an address-space limit the budget is what is left beside what is held; otherwise it
    // is the host's whole memory, which the buffer's next doubling must fit in.
    const bool budget_is_left = static_memory_limits().rlimit_bytes != 0;
    const std::string what =
        str_cat("shuffle: a buffer of ", cap_, " elements, whose first ", buf_.size() + 1, " hold ",
                byte_size(held_), ", ",
                budget_is_left ? "taking as many bytes again" : "growing to twice that");
    if (auto s = check_host_memory(what, budget_is_left ? held_ : next_check_); !s.ok()) return s;
    return e;
  }

  std::unique_ptr<Iterator> in_;
  size_t cap_;
  std::mt19937_64 rng_;
  std::vector<Element> buf_;
  uint64_t held_ = 0;  // element_bytes of what buf_ holds
  uint64_t next_check_ = kFirstCheck;
  bool input_done_ = false;
};

class Shuffle final : public Dataset {
 public:
  Shuffle(DatasetPtr input, int64_t buffer, uint64_t seed, bool reshuffle)
      : input_(std::move(input)),
        buffer_(std::max<int64_t>(buffer, 1)),
        seed_(seed),
        reshuffle_(reshuffle) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    const uint64_t seed = reshuffle_ ? seed_ + epoch_.fetch_add(1) : seed_;
    return std::make_unique<ShuffleBuffer>(input_->make_iterator(), static_cast<size_t>(buffer_),
                                           seed);
  }

 private:
  DatasetPtr input_;
  int64_t buffer_;
  uint64_t seed_;
  bool reshuffle_;
  mutable std::atomic<uint64_t> epoch_{0};
};

class Repeat final : public Dataset {
 public:
  Repeat(DatasetPtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    class It final : public Iterator {
     public:
      It(DatasetPtr in, int64_t count) : in_(std::move(in)), count_(count) {}
      Next next() override {
        for (;;) {
          if (count_ >= 0 && pass_ >= count_) return kEnd;
          if (it_ == nullptr) {
            it_ = in_->make_iterator();
            seen_in_pass_ = 0;
          }
          auto e = it_->next();
          if (!e.ok()) {
            count_ = pass_ = 0;  // an error ends the iteration: no further pass
            return e;
          }
          if (e->has_value()) {
            ++seen_in_pass_;
            return e;
          }
          it_.reset();
          ++pass_;
          if (seen_in_pass_ == 0) return kEnd;  // an empty input repeats to nothing, not forever
        }
      }

     private:
      DatasetPtr in_;
      int64_t count_;
      int64_t pass_ = 0;
      int64_t seen_in_pass_ = 0;
      std::unique_ptr<Iterator> it_;
    };
    return std::make_unique<It>(input_, count_);
  }

 private:
  DatasetPtr input_;
  int64_t count_;
};

// take, skip and shard: which input positions pass.
class Select final : public Dataset {
 public:
  enum class Kind { kTake, kSkip, kShard };
  Select(DatasetPtr input, Kind kind, int64_t a, int64_t b)
      : input_(std::move(input)), kind_(kind), a_(a), b_(b) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    class It final : public Iterator {
     public:
      It(std::unique_ptr<Iterator> in, Kind kind, int64_t a, int64_t b)
          : in_(std::move(in)), kind_(kind), a_(a), b_(b) {}
      Next next() override {
        for (;;) {
          if (kind_ == Kind::kTake && a_ >= 0 && i_ >= a_) return kEnd;
          auto e = in_->next();
          if (!e.ok() || !e->has_value()) return e;
          const int64_t i = i_++;
          if (kind_ == Kind::kTake) return e;
          if (kind_ == Kind::kSkip && i >= a_) return e;
          if (kind_ == Kind::kShard && i % a_ == b_) return e;
        }
      }

     private:
      std::unique_ptr<Iterator> in_;
      Kind kind_;
      int64_t a_, b_, i_ = 0;
    };
    return std::make_unique<It>(input_->make_iterator(), kind_, a_, b_);
  }

 private:
  DatasetPtr input_;
  Kind kind_;
  int64_t a_, b_;
};

// enumerate: each element gains {"index": int64}, its position counted from `start`.
class Enumerate final : public Dataset {
 public:
  Enumerate(DatasetPtr input, int64_t start) : input_(std::move(input)), start_(start) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    class It final : public Iterator {
     public:
      It(std::unique_ptr<Iterator> in, int64_t next) : in_(std::move(in)), next_(next) {}
      Next next() override {
        auto e = in_->next();
        if (!e.ok() || !e->has_value()) return e;
        if ((*e)->count("index") > 0) {
          return absl::InvalidArgumentError(
              str_cat("enumerate: element ", next_, " already has an 'index' component"));
        }
        (*e)->emplace("index", scalar_int(next_++));
        return e;
      }

     private:
      std::unique_ptr<Iterator> in_;
      int64_t next_;
    };
    return std::make_unique<It>(input_->make_iterator(), start_);
  }

 private:
  DatasetPtr input_;
  int64_t start_;
};

}  // namespace

std::unique_ptr<Iterator> error_iterator(absl::Status status) {
  return std::make_unique<ErrorIterator>(std::move(status));
}

DatasetPtr Dataset::list_files(const std::string& pattern, bool shuffle, uint64_t seed) {
  return std::make_shared<ListFiles>(pattern, shuffle, seed);
}
DatasetPtr Dataset::tfrecords(std::vector<std::string> files, ReaderOptions options) {
  return std::make_shared<TFRecords>(std::move(files), options);
}
DatasetPtr Dataset::from_elements(std::vector<Element> elements) {
  return std::make_shared<FromElements>(std::move(elements));
}
DatasetPtr Dataset::range(int64_t n) { return std::make_shared<RangeDataset>(n); }

DatasetPtr Dataset::interleave_tfrecords(InterleaveOptions options, ReaderOptions reader) const {
  return interleave(
      [reader](const Element& e) -> std::unique_ptr<Iterator> {
        const auto it = e.find("filename");
        if (it == e.end() || it->second.type != FeatureType::kBytes ||
            it->second.bytes.size() != 1) {
          return error_iterator(
              absl::InvalidArgumentError("interleave_tfrecords: each input element needs a scalar "
                                         "bytes 'filename' (from list_files)"));
        }
        return std::make_unique<TFRecordIterator>(std::vector<std::string>{it->second.bytes[0]},
                                                  reader);
      },
      options);
}

DatasetPtr Dataset::shuffle(int64_t buffer_size, uint64_t seed,
                            bool reshuffle_each_iteration) const {
  return std::make_shared<Shuffle>(self(), buffer_size, seed, reshuffle_each_iteration);
}
DatasetPtr Dataset::repeat(int64_t count) const { return std::make_shared<Repeat>(self(), count); }
DatasetPtr Dataset::take(int64_t count) const {
  return std::make_shared<Select>(self(), Select::Kind::kTake, count, 0);
}
DatasetPtr Dataset::skip(int64_t count) const {
  return std::make_shared<Select>(self(), Select::Kind::kSkip, count, 0);
}
DatasetPtr Dataset::enumerate(int64_t start) const {
  return std::make_shared<Enumerate>(self(), start);
}
DatasetPtr Dataset::shard(int64_t num_shards, int64_t index) const {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return std::make_shared<FailingDataset>(absl::InvalidArgumentError(
        str_cat("shard: index ", index, " is not in [0, ", num_shards, ")")));
  }
  return std::make_shared<Select>(self(), Select::Kind::kShard, num_shards, index);
}

absl::StatusOr<std::vector<Element>> collect(const Dataset& dataset, int64_t limit) {
  auto it = dataset.make_iterator();
  std::vector<Element> out;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    auto e = it->next();
    if (!e.ok()) return e.status();
    if (!e->has_value()) break;
    out.push_back(std::move(**e));
  }
  return out;
}

}  // namespace tpusim::runtime::data
