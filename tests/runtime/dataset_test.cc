#include "runtime/data/dataset.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/configs/config_test_util.h"

namespace tpusim::runtime::data {
namespace dataset_test {

using config::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

std::vector<int64_t> values(const absl::StatusOr<std::vector<Element>>& got,
                            const std::string& key = "value") {
  EXPECT_TRUE(got.ok()) << got.status();
  std::vector<int64_t> out;
  if (!got.ok()) return out;
  for (const auto& e : *got) out.push_back(e.at(key).ints.at(0));
  return out;
}

std::vector<int64_t> iota(int64_t from, int64_t to, int64_t step = 1) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; i += step) v.push_back(i);
  return v;
}

int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n - 2;  // . and ..
}

MapFn times_ten() {
  return [](Element e) -> absl::StatusOr<Element> {
    e["value"].ints[0] *= 10;
    return e;
  };
}

TEST(Dataset, TakeSkipShard) {
  EXPECT_THAT(values(collect(*Dataset::range(10)->take(3))), ElementsAre(0, 1, 2));
  EXPECT_THAT(values(collect(*Dataset::range(10)->skip(7))), ElementsAre(7, 8, 9));
  EXPECT_THAT(values(collect(*Dataset::range(10)->shard(3, 1))), ElementsAre(1, 4, 7));
  EXPECT_THAT(collect(*Dataset::range(10)->shard(3, 3)).status().message(),
              HasSubstr("shard: index 3 is not in [0, 3)"));
}

TEST(Dataset, ShuffleIsASeededPermutationThatReshufflesEachPass) {
  const auto ds = Dataset::range(100)->shuffle(16, 7);
  const auto first = values(collect(*ds));
  const auto second = values(collect(*ds));
  EXPECT_THAT(first, UnorderedElementsAreArray(iota(0, 100)));
  EXPECT_NE(first, iota(0, 100));
  EXPECT_NE(first, second);  // a new order each pass
  EXPECT_EQ(values(collect(*Dataset::range(100)->shuffle(16, 7))),
            first);  // same seed, same first pass
  const auto fixed = Dataset::range(100)->shuffle(16, 7, /*reshuffle_each_iteration=*/false);
  EXPECT_EQ(values(collect(*fixed)), values(collect(*fixed)));
  // A buffer of 16 never moves an element earlier by more than 15 places.
  for (size_t i = 0; i < first.size(); ++i) EXPECT_LE(first[i], static_cast<int64_t>(i) + 15);
}

TEST(Dataset, RepeatCountsPassesAndEndsOnEmptyInput) {
  EXPECT_THAT(values(collect(*Dataset::range(3)->repeat(2))), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_EQ(values(collect(*Dataset::range(3)->repeat()->take(10))).size(), 10u);
  EXPECT_TRUE(values(collect(*Dataset::range(0)->repeat())).empty());
  // shuffle then repeat: each pass a permutation of its own.
  const auto passes = values(collect(*Dataset::range(20)->shuffle(20, 3)->repeat(2)));
  EXPECT_THAT(std::vector<int64_t>(passes.begin(), passes.begin() + 20),
              UnorderedElementsAreArray(iota(0, 20)));
  EXPECT_NE(std::vector<int64_t>(passes.begin(), passes.begin() + 20),
            std::vector<int64_t>(passes.begin() + 20, passes.end()));
}

TEST(Dataset, ParallelMapKeepsOrderWhenDeterministic) {
  MapFn slow = [](Element e) -> absl::StatusOr<Element> {
    // Early elements finish last.
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (20 - e["value"].ints[0] % 20)));
    e["value"].ints[0] *= 10;
    return e;
  };
  EXPECT_THAT(values(collect(*Dataset::range(40)->map(slow, 4))),
              ElementsAreArray(iota(0, 400, 10)));
  EXPECT_THAT(values(collect(*Dataset::range(40)->map(times_ten(), 1))),
              ElementsAreArray(iota(0, 400, 10)));
  EXPECT_THAT(values(collect(*Dataset::range(40)->map(slow, 4, /*deterministic=*/false))),
              UnorderedElementsAreArray(iota(0, 400, 10)));
  EXPECT_THAT(values(collect(*Dataset::range(40)->map(times_ten(), kAutotune))),
              ElementsAreArray(iota(0, 400, 10)));
}

BatchOptions parallel_batch(int threads, bool drop_remainder = false, bool pad_to_full = false) {
  BatchOptions o;
  o.num_parallel_calls = threads;
  o.drop_remainder = drop_remainder;
  o.pad_to_full = pad_to_full;
  return o;
}

// Each batch's values, flattened, and its mask when it has one.
std::vector<std::vector<int64_t>> batch_values(const absl::StatusOr<std::vector<Element>>& got) {
  EXPECT_TRUE(got.ok()) << got.status();
  std::vector<std::vector<int64_t>> out;
  if (!got.ok()) return out;
  for (const auto& b : *got) {
    out.push_back(b.at("value").ints);
    if (b.count("mask") > 0) {
      for (float m : b.at("mask").floats) out.back().push_back(m == 1.0F ? -1 : -2);
    }
  }
  return out;
}

// A parallel batch gives exactly the sequential batches, whichever worker assembles which: the
// rows are drawn in order, and batches come out in order even when early ones finish last.
TEST(Dataset, ParallelBatchGivesTheSequentialBatchesInOrder) {
  MapFn slow_early = [](Element e) -> absl::StatusOr<Element> {
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (103 - e["value"].ints[0])));
    return e;
  };
  for (bool drop : {false, true}) {
    for (bool pad : {false, true}) {
      const auto want = batch_values(collect(*Dataset::range(103)->batch(10, drop, pad)));
      ASSERT_EQ(want.size(), drop ? 10u : 11u);
      for (int threads : {2, 3, kAutotune}) {
        EXPECT_EQ(batch_values(
                      collect(*Dataset::range(103)->batch(10, parallel_batch(threads, drop, pad)))),
                  want)
            << "threads " << threads << " drop " << drop << " pad " << pad;
      }
      EXPECT_EQ(
          batch_values(collect(
              *Dataset::range(103)->map(slow_early)->batch(10, parallel_batch(4, drop, pad)))),
          want);
    }
  }
  // A batch as large as the input, and larger.
  EXPECT_EQ(batch_values(collect(*Dataset::range(6)->batch(6, parallel_batch(3)))),
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5}}));
  EXPECT_TRUE(collect(*Dataset::range(6)->batch(7, parallel_batch(3, true)))->empty());
}

TEST(Dataset, ParallelBatchErrorsReachTheConsumerInPlace) {
  MapFn fails_at_25 = [](Element e) -> absl::StatusOr<Element> {
    if (e["value"].ints[0] == 25) return absl::InvalidArgumentError("bad pixel count");
    return e;
  };
  auto it = Dataset::range(100)->map(fails_at_25, 2)->batch(10, parallel_batch(3))->make_iterator();
  for (int64_t b = 0; b < 2; ++b) {
    auto e = it->next();
    ASSERT_TRUE(e.ok() && e->has_value()) << e.status();
    EXPECT_EQ((**e).at("value").ints.front(), 10 * b);
  }
  auto err = it->next();
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.status().message(), HasSubstr("map, element 25: bad pixel count"));
  auto after = it->next();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());

  FeatureValue a = scalar_int(1), b = a;
  b.shape = {1};
  auto ragged = collect(
      *Dataset::from_elements({{{"value", a}}, {{"value", a}}, {{"value", a}}, {{"value", b}}})
           ->batch(2, parallel_batch(2)));
  EXPECT_THAT(ragged.status().message(),
              HasSubstr("batch: element 1's 'value' is int64[1], element 0's is int64[]"));
  EXPECT_THAT(collect(*Dataset::range(4)->batch(0)).status().message(),
              HasSubstr("batch: batch_size 0 and num_parallel_calls 1 must be at least 1"));
  EXPECT_THAT(collect(*Dataset::range(4)->batch(2, parallel_batch(0))).status().message(),
              HasSubstr("num_parallel_calls 0 must be at least 1"));
}

TEST(Dataset, AMapErrorReachesTheConsumerInPlaceWithItsContext) {
  MapFn fails_at_5 = [](Element e) -> absl::StatusOr<Element> {
    if (e["value"].ints[0] == 5) return absl::InvalidArgumentError("bad pixel count");
    return e;
  };
  for (int threads : {1, 3}) {
    auto it = Dataset::range(100)->map(fails_at_5, threads)->make_iterator();
    for (int i = 0; i < 5; ++i) {
      auto e = it->next();
      ASSERT_TRUE(e.ok() && e->has_value()) << threads;
      EXPECT_EQ((**e).at("value").ints[0], i);
    }
    auto err = it->next();
    ASSERT_FALSE(err.ok());
    EXPECT_THAT(err.status().message(), HasSubstr("map, element 5: bad pixel count"));
    auto after = it->next();  // the iteration has ended
    ASSERT_TRUE(after.ok());
    EXPECT_FALSE(after->has_value());
  }
}

TEST(Dataset, AnErrorEndsTheIterationThroughEveryStage) {
  MapFn fails_at_2 = [](Element e) -> absl::StatusOr<Element> {
    if (e["value"].ints[0] == 2) return absl::DataLossError("boom");
    return e;
  };
  const auto failing = Dataset::range(10)->map(fails_at_2);
  for (const DatasetPtr& ds :
       {failing->repeat(), failing->batch(3), failing->shuffle(4, 1), failing->prefetch(2),
        failing->take(8), failing->skip(1), failing->map(times_ten(), 2),
        failing->batch(3, parallel_batch(2))}) {
    auto it = ds->make_iterator();
    bool saw_error = false;
    for (int i = 0; i < 50; ++i) {
      auto e = it->next();
      if (!e.ok()) {
        EXPECT_THAT(e.status().message(), HasSubstr("map, element 2: boom"));
        saw_error = true;
        continue;
      }
      if (!e->has_value()) break;
      EXPECT_FALSE(saw_error) << "an element after the error";
    }
    EXPECT_TRUE(saw_error);
    auto end = it->next();
    ASSERT_TRUE(end.ok());
    EXPECT_FALSE(end->has_value());
  }
}

TEST(Dataset, BatchDropsKeepsOrPadsTheRemainder) {
  auto b = collect(*Dataset::range(10)->batch(4));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 3u);
  EXPECT_THAT((*b)[0].at("value").shape, ElementsAre(4));
  EXPECT_THAT((*b)[2].at("value").ints, ElementsAre(8, 9));
  EXPECT_EQ(collect(*Dataset::range(10)->batch(4, /*drop_remainder=*/true))->size(), 2u);

  auto padded = collect(*Dataset::range(10)->batch(4, false, /*pad_to_full=*/true));
  ASSERT_TRUE(padded.ok());
  ASSERT_EQ(padded->size(), 3u);
  EXPECT_THAT((*padded)[2].at("value").ints, ElementsAre(8, 9, 0, 0));
  EXPECT_THAT((*padded)[2].at("mask").floats, ElementsAre(1.0F, 1.0F, 0.0F, 0.0F));
  EXPECT_THAT((*padded)[0].at("mask").floats, ElementsAre(1.0F, 1.0F, 1.0F, 1.0F));
}

// A batch built while a consumer's hold is declared counts the held batches in its first
// element's memory check: 2^40 batches of 4 range elements (each over 8 bytes) are over any
// host's budget and refused at the first element, while the same batch built outside the scope,
// or after it ends, runs. The declaration is captured when batch() is called, not when iterated.
TEST(Dataset, ABatchBuiltUnderAConsumerHoldCountsItsBatchesAtTheFirstElement) {
  DatasetPtr held;
  {
    const ScopedConsumerHold hold({uint64_t{1} << 40, "a loop of 2^40 batches"});
    held = Dataset::range(10)->batch(4);
  }
  const auto refused = collect(*held);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("batch: a loop of 2^40 batches (1099511627776 batches of 4 elements of "));
  EXPECT_EQ(ScopedConsumerHold::current().batches, 0u);
  EXPECT_TRUE(collect(*Dataset::range(10)->batch(4)).ok());
}

TEST(Dataset, BatchStacksShapesAndRefusesRaggedElements) {
  FeatureValue img;
  img.type = FeatureType::kFloat;
  img.shape = {2, 2};
  img.floats = {1, 2, 3, 4};
  FeatureValue other = img;
  other.shape = {4};
  auto b = collect(*Dataset::from_elements({{{"image", img}}, {{"image", img}}})->batch(2));
  ASSERT_TRUE(b.ok());
  EXPECT_THAT((*b)[0].at("image").shape, ElementsAre(2, 2, 2));
  EXPECT_EQ((*b)[0].at("image").floats.size(), 8u);
  auto ragged = collect(*Dataset::from_elements({{{"image", img}}, {{"image", other}}})->batch(2));
  EXPECT_THAT(ragged.status().message(),
              HasSubstr("batch: element 1's 'image' is float[4], element 0's is float[2, 2]"));
}

class DatasetFiles : public ::testing::Test {
 protected:
  // Four files of 3 records: "f<i>-r<j>".
  void SetUp() override {
    for (int f = 0; f < 4; ++f) {
      auto w = TFRecordWriter::open((dir_.path() / ("part-" + std::to_string(f))).string());
      for (int r = 0; r < 3; ++r)
        ASSERT_TRUE((*w)->write("f" + std::to_string(f) + "-r" + std::to_string(r)).ok());
      ASSERT_TRUE((*w)->close().ok());
    }
  }
  std::string pattern() const { return (dir_.path() / "part-*").string(); }
  static std::vector<std::string> records(const absl::StatusOr<std::vector<Element>>& got) {
    EXPECT_TRUE(got.ok()) << got.status();
    std::vector<std::string> out;
    if (got.ok()) {
      for (const auto& e : *got) out.push_back(e.at("record").bytes.at(0));
    }
    return out;
  }
  TempDir dir_;
};

TEST_F(DatasetFiles, ListFilesThenInterleaveRecords) {
  const std::vector<std::string> want = {"f0-r0", "f1-r0", "f0-r1", "f1-r1", "f0-r2", "f1-r2",
                                         "f2-r0", "f3-r0", "f2-r1", "f3-r1", "f2-r2", "f3-r2"};
  InterleaveOptions o;
  o.cycle_length = 2;
  EXPECT_EQ(records(collect(*Dataset::list_files(pattern())->interleave_tfrecords(o))), want);
  o.parallel = true;  // deterministic: the same order, read by threads
  EXPECT_EQ(records(collect(*Dataset::list_files(pattern())->interleave_tfrecords(o))), want);
  o.deterministic = false;
  EXPECT_THAT(records(collect(*Dataset::list_files(pattern())->interleave_tfrecords(o))),
              UnorderedElementsAreArray(want));
  o = InterleaveOptions{};
  o.cycle_length = 2;
  o.block_length = 2;
  EXPECT_THAT(records(collect(*Dataset::list_files(pattern())->interleave_tfrecords(o)->take(4))),
              ElementsAre("f0-r0", "f0-r1", "f1-r0", "f1-r1"));
  // Sequential reading of all the files, in name order.
  EXPECT_EQ(
      records(collect(*Dataset::tfrecords({pattern().substr(0, pattern().size() - 1) + "1"}))),
      (std::vector<std::string>{"f1-r0", "f1-r1", "f1-r2"}));
}

// Records read with name_records carry their file and place to the first map, which takes them
// off before its function runs and names them in the function's error. Each record here is 5
// bytes framed in 16 (length, its CRC, the data's CRC): record 2 starts at byte 42.
TEST_F(DatasetFiles, ANamedRecordsErrorGivesItsFileAndPlace) {
  ReaderOptions named;
  named.name_records = true;
  const std::string file = pattern().substr(0, pattern().size() - 1) + "1";
  const MapFn fail_on_r2 = [](Element e) -> absl::StatusOr<Element> {
    if (e.size() != 1) return absl::InternalError("the map saw the record's source");
    if (e.at("record").bytes.at(0) == "f1-r2") return absl::InvalidArgumentError("bad label");
    return e;
  };
  for (const int threads : {1, 2}) {
    const auto got = collect(*Dataset::tfrecords({file}, named)->map(fail_on_r2, threads));
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
    EXPECT_EQ(got.status().message(),
              "map, element 2 (" + file + ", record 2 at byte offset 42): bad label");
  }
  // Unnamed (the default), elements are the record alone.
  const auto plain = collect(*Dataset::tfrecords({file})->map(fail_on_r2));
  EXPECT_EQ(plain.status().message(), "map, element 2: bad label");
  // Records that pass the map lose their source.
  const auto passed = collect(*Dataset::tfrecords({file}, named)->take(2)->map(fail_on_r2));
  EXPECT_THAT(records(passed), ElementsAre("f1-r0", "f1-r1"));
}

TEST_F(DatasetFiles, ListFilesShufflesWithItsSeedAndReportsNoMatch) {
  auto names = [](const absl::StatusOr<std::vector<Element>>& got) {
    std::vector<std::string> out;
    for (const auto& e : *got)
      out.push_back(e.at("filename").bytes[0].substr(e.at("filename").bytes[0].size() - 6));
    return out;
  };
  EXPECT_THAT(names(collect(*Dataset::list_files(pattern()))),
              ElementsAre("part-0", "part-1", "part-2", "part-3"));
  const auto shuffled = names(collect(*Dataset::list_files(pattern(), true, 11)));
  EXPECT_THAT(shuffled, UnorderedElementsAreArray({"part-0", "part-1", "part-2", "part-3"}));
  EXPECT_EQ(names(collect(*Dataset::list_files(pattern(), true, 11))), shuffled);
  EXPECT_THAT(collect(*Dataset::list_files(pattern() + "-none")).status().message(),
              HasSubstr("no file matches"));
}

TEST_F(DatasetFiles, ACorruptFileStopsTheInterleaveNamingIt) {
  const std::string bad = (dir_.path() / "part-2").string();
  std::string bytes = frame_record("f2-r0");
  bytes[14] ^= 1;
  { std::ofstream(bad, std::ios::binary) << bytes; }
  for (bool parallel : {false, true}) {
    InterleaveOptions o;
    o.cycle_length = 4;
    o.parallel = parallel;
    auto got = collect(*Dataset::list_files(pattern())->interleave_tfrecords(o));
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(got.status().message(), HasSubstr(bad + ": corrupt record at byte offset 0"));
  }
}

TEST(Dataset, PrefetchKeepsOrderAndAppliesBackpressure) {
  std::atomic<int> produced{0};
  MapFn count = [&](Element e) -> absl::StatusOr<Element> {
    ++produced;
    return e;
  };
  EXPECT_THAT(values(collect(*Dataset::range(50)->prefetch(3))), ElementsAreArray(iota(0, 50)));
  auto it = Dataset::range(1000)->map(count)->prefetch(2)->make_iterator();
  ASSERT_TRUE(it->next().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time to overrun, if it could
  // One consumed, two queued, one more the producer may hold while it waits.
  EXPECT_LE(produced.load(), 4);
}

TEST(Dataset, StoppingEarlyJoinsEveryThread) {
  const int before = thread_count();
  {
    InterleaveOptions o;
    o.cycle_length = 3;
    o.parallel = true;
    auto ds =
        Dataset::range(3)
            ->interleave([](const Element&) { return Dataset::range(1000000)->make_iterator(); }, o)
            ->repeat()
            ->map(times_ten(), 3)
            ->batch(5, parallel_batch(3))
            ->prefetch(4);
    auto it = ds->make_iterator();
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(it->next().ok());
    EXPECT_GT(thread_count(), before);
  }  // the iterator goes with its threads
  EXPECT_EQ(thread_count(), before);
}

}  // namespace dataset_test
}  // namespace tpusim::runtime::data
