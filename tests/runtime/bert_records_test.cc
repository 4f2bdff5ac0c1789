// Synthetic BERT pretraining records: run_pretraining.py's feature spec, the layout
// create_pretraining_data.py gives an example, determinism, and the write -> read -> parse trip.
#include "runtime/data/bert_records.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/data/tfrecord.h"
#include "tests/configs/config_test_util.h"

namespace tpusim::runtime::data {
namespace bert_records_test {

using config::testing::TempDir;
using ::testing::HasSubstr;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every invariant of one example of `shape` (the layout bert_records.h states).
void expect_example_holds(const Element& e, const BertRecordShape& shape) {
  ASSERT_EQ(e.size(), 7u);
  const auto& ids = e.at("input_ids").ints;
  const auto& mask = e.at("input_mask").ints;
  const auto& segments = e.at("segment_ids").ints;
  const auto& positions = e.at("masked_lm_positions").ints;
  const auto& labels = e.at("masked_lm_ids").ints;
  const auto& weights = e.at("masked_lm_weights").floats;
  const auto& next = e.at("next_sentence_labels").ints;
  ASSERT_EQ(ids.size(), static_cast<size_t>(shape.seq_length));
  ASSERT_EQ(positions.size(), static_cast<size_t>(shape.max_predictions));
  ASSERT_EQ(weights.size(), static_cast<size_t>(shape.max_predictions));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_TRUE(next[0] == 0 || next[0] == 1);

  // The real tokens are a prefix: input_mask is 1...1 0...0, the padding [PAD] in segment 0.
  int64_t real = 0;
  while (real < shape.seq_length && mask[real] == 1) ++real;
  for (int64_t i = real; i < shape.seq_length; ++i) {
    EXPECT_EQ(mask[i], 0) << i;
    EXPECT_EQ(ids[i], kBertPadId) << i;
    EXPECT_EQ(segments[i], 0) << i;
  }
  ASSERT_GE(real, 5);  // [CLS] a [SEP] b [SEP]
  EXPECT_EQ(ids[0], kBertClsId);
  EXPECT_EQ(ids[real - 1], kBertSepId);
  // Exactly two [SEP]s: the one ending A (segment 0) and the last (segment 1, as B).
  std::vector<int64_t> seps;
  for (int64_t i = 0; i < real; ++i) {
    if (ids[i] == kBertSepId) seps.push_back(i);
  }
  ASSERT_EQ(seps.size(), 2u);
  ASSERT_GE(seps[0], 2);         // A holds a token
  ASSERT_LE(seps[0], real - 3);  // and so does B
  const int64_t first_ordinary = shape.vocab > 999 ? 999 : kBertMaskId + 1;
  const auto ordinary = [&](int64_t id) { return id >= first_ordinary && id < shape.vocab; };
  for (int64_t i = 0; i < real; ++i) {  // segment 0 to the first [SEP], then 1
    EXPECT_EQ(segments[i], i <= seps[0] ? 0 : 1) << i;
    if (i != 0 && i != seps[0] && i != real - 1) {
      EXPECT_TRUE(ids[i] == kBertMaskId || ordinary(ids[i])) << ids[i];
    }
  }

  // The predictions: a prefix of strictly ascending positions of A's and B's tokens, with their
  // original (ordinary) ids and weight 1; then position 0, id 0, weight 0.
  int64_t count = 0;
  while (count < shape.max_predictions && weights[count] == 1.0F) ++count;
  // round(real * 0.15) as Python rounds, half to even: 30 tokens mask 4 (4.5), 50 mask 8 (7.5).
  const auto wanted = std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(real * 0.15)));
  EXPECT_EQ(count, std::min<int64_t>({shape.max_predictions, wanted, real - 3}));
  for (int64_t k = 0; k < count; ++k) {
    const int64_t p = positions[k];
    EXPECT_GT(p, 0);
    EXPECT_LT(p, real - 1);
    EXPECT_NE(p, seps[0]);
    if (k > 0) {
      EXPECT_GT(p, positions[k - 1]);
    }
    EXPECT_TRUE(ordinary(labels[k])) << labels[k];
    // A kept token still holds its label; a replaced one [MASK] or another ordinary token.
    EXPECT_TRUE(ids[p] == kBertMaskId || ordinary(ids[p])) << ids[p];
  }
  for (int64_t k = count; k < shape.max_predictions; ++k) {
    EXPECT_EQ(positions[k], 0);
    EXPECT_EQ(labels[k], 0);
    EXPECT_EQ(weights[k], 0.0F);
  }
}

TEST(BertRecords, SpecIsRunPretrainingsNameToFeatures) {
  const FeatureSpec spec = bert_feature_spec({128, 20, 30522});
  ASSERT_EQ(spec.size(), 7u);
  for (const char* name : {"input_ids", "input_mask", "segment_ids"}) {
    EXPECT_EQ(spec.at(name).type, FeatureType::kInt64) << name;
    EXPECT_EQ(spec.at(name).shape, (std::vector<int64_t>{128})) << name;
  }
  for (const char* name : {"masked_lm_positions", "masked_lm_ids"}) {
    EXPECT_EQ(spec.at(name).type, FeatureType::kInt64) << name;
    EXPECT_EQ(spec.at(name).shape, (std::vector<int64_t>{20})) << name;
  }
  EXPECT_EQ(spec.at("masked_lm_weights").type, FeatureType::kFloat);
  EXPECT_EQ(spec.at("masked_lm_weights").shape, (std::vector<int64_t>{20}));
  EXPECT_EQ(spec.at("next_sentence_labels").type, FeatureType::kInt64);
  EXPECT_EQ(spec.at("next_sentence_labels").shape, (std::vector<int64_t>{1}));
  for (const auto& [name, entry] : spec) {
    EXPECT_FALSE(entry.var_len) << name;
    EXPECT_FALSE(entry.default_value) << name;
  }
}

TEST(BertRecords, ExamplesHoldCreatePretrainingDatasLayout) {
  const BertRecordShape shape{128, 20, 30522};
  int masked = 0, predictions = 0, random_next = 0, short_ones = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const Element e = synthetic_bert_example(shape, seed);
    expect_example_holds(e, shape);
    if (::testing::Test::HasFailure()) FAIL() << "seed " << seed;
    for (const auto& [name, v] : e) EXPECT_EQ(v.shape, bert_feature_spec(shape).at(name).shape);
    const auto& ids = e.at("input_ids").ints;
    const auto& positions = e.at("masked_lm_positions").ints;
    for (size_t k = 0; k < positions.size() && e.at("masked_lm_weights").floats[k] > 0; ++k) {
      masked += ids[positions[k]] == kBertMaskId;
      ++predictions;
    }
    random_next += static_cast<int>(e.at("next_sentence_labels").ints[0]);
    short_ones += e.at("input_mask").ints.back() == 0;
  }
  // 400 examples, most of 128 real tokens and round(19.2) = 19 predictions: about 7600 masked
  // positions, 80% of them [MASK] (sd 0.5%); 50% random next (sd 2.5%); 10% short (sd 1.5%).
  EXPECT_GT(predictions, 7000);
  EXPECT_NEAR(static_cast<double>(masked) / predictions, 0.8, 0.03);
  EXPECT_NEAR(random_next / 400.0, 0.5, 0.1);
  EXPECT_NEAR(short_ones / 400.0, 0.1, 0.06);
}

TEST(BertRecords, ShortAndSmallShapesHoldTheLayoutToo) {
  for (const BertRecordShape& shape :
       {BertRecordShape{8, 8, 105}, BertRecordShape{8, 1, 1000}, BertRecordShape{512, 76, 30522},
        BertRecordShape{64, 10, 500}}) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      expect_example_holds(synthetic_bert_example(shape, seed), shape);
      if (::testing::Test::HasFailure()) FAIL() << shape.seq_length << " seed " << seed;
    }
  }
}

TEST(BertRecords, SameSeedSameExampleAndABatchIsItsExamples) {
  const BertRecordShape shape{32, 5, 2000};
  const Element a = synthetic_bert_example(shape, 7), b = synthetic_bert_example(shape, 7);
  EXPECT_EQ(a.at("input_ids").ints, b.at("input_ids").ints);
  EXPECT_EQ(a.at("masked_lm_weights").floats, b.at("masked_lm_weights").floats);
  EXPECT_NE(a.at("input_ids").ints, synthetic_bert_example(shape, 8).at("input_ids").ints);

  const Element batch = synthetic_bert_batch(shape, 3, 6);
  ASSERT_EQ(batch.size(), 7u);
  EXPECT_EQ(batch.at("input_ids").shape, (std::vector<int64_t>{3, 32}));
  EXPECT_EQ(batch.at("masked_lm_weights").shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(batch.at("next_sentence_labels").shape, (std::vector<int64_t>{3, 1}));
  const auto& ids = batch.at("input_ids").ints;
  EXPECT_EQ(std::vector<int64_t>(ids.begin() + 32, ids.begin() + 64), a.at("input_ids").ints);
  EXPECT_TRUE(synthetic_bert_batch(shape, 0, 1).empty());
  EXPECT_TRUE(synthetic_bert_example({4, 1, 30522}, 1).empty());  // a refused shape
}

TEST(BertRecords, WrittenShardsParseBackToTheSyntheticExamples) {
  TempDir dir;
  BertRecordJob job;
  job.shape = {64, 10, 30522};
  job.output_dir = (dir.path() / "bert").string();
  job.examples = 25;
  job.shards = 3;
  job.compression = Compression::kGzip;
  job.seed = 42;
  auto done = write_bert_records(job);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->examples, 25u);
  EXPECT_EQ(done->shard_examples, (std::vector<uint64_t>{8, 8, 9}));
  ASSERT_EQ(done->shard_paths.size(), 3u);
  EXPECT_EQ(std::filesystem::path(done->shard_paths[2]).filename(),
            "train-00002-of-00003.tfrecord.gz");
  uint64_t bytes = 0;
  for (const auto& p : done->shard_paths) bytes += std::filesystem::file_size(p);
  EXPECT_EQ(done->bytes, bytes);

  // Read back through the Dataset: example i is synthetic_bert_example(seed + i), feature by
  // feature.
  auto ds = Dataset::tfrecords(done->shard_paths)->map(bert_parse_fn(job.shape));
  auto parsed = collect(*ds);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 25u);
  for (size_t i = 0; i < parsed->size(); ++i) {
    const Element want = synthetic_bert_example(job.shape, job.seed + i);
    ASSERT_EQ((*parsed)[i].size(), 7u);
    for (const auto& [name, v] : want) {
      const FeatureValue& got = (*parsed)[i].at(name);
      EXPECT_EQ(got.type, v.type) << name;
      EXPECT_EQ(got.shape, v.shape) << name;
      EXPECT_EQ(got.ints, v.ints) << name << " of example " << i;
      EXPECT_EQ(got.floats, v.floats) << name << " of example " << i;
    }
  }
}

TEST(BertRecords, BytesDoNotDependOnTheThreadCount) {
  TempDir dir;
  BertRecordJob job;
  job.shape = {128, 20, 30522};
  job.examples = 40;
  job.shards = 4;
  job.output_dir = (dir.path() / "one").string();
  job.threads = 1;
  auto one = write_bert_records(job);
  job.output_dir = (dir.path() / "four").string();
  job.threads = 4;
  auto four = write_bert_records(job);
  ASSERT_TRUE(one.ok() && four.ok());
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(file_bytes(one->shard_paths[s]), file_bytes(four->shard_paths[s])) << s;
  }
  EXPECT_EQ(one->bytes, four->bytes);
  // One shard holds the same records as four.
  job.output_dir = (dir.path() / "whole").string();
  job.shards = 1;
  auto whole = write_bert_records(job);
  ASSERT_TRUE(whole.ok());
  std::string joined;
  for (const auto& p : four->shard_paths) joined += file_bytes(p);
  EXPECT_EQ(file_bytes(whole->shard_paths[0]), joined);
}

TEST(BertRecords, ParseErrorsNameTheFeature) {
  const BertRecordShape shape{16, 3, 30522};
  auto parse = bert_parse_fn(shape);
  // A record of a longer sequence: input_ids has 32 values where the spec says 16.
  Element longer = synthetic_bert_example({32, 3, 30522}, 1);
  ExampleBuilder b;
  for (const auto& [name, v] : longer) {
    v.type == FeatureType::kFloat ? b.floats(name, v.floats) : b.ints(name, v.ints);
  }
  auto r = parse({{"record", scalar_bytes(b.serialize())}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("feature 'input_ids' has 32 values; shape [16]"));
  r = parse({{"record", scalar_bytes(ExampleBuilder().ints("label", {1}).serialize())}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("BERT pretraining record: feature 'input_ids' is required"));
  r = parse({{"value", scalar_int(1)}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no scalar 'record'"));
  r = bert_parse_fn({4, 1, 30522})({{"record", scalar_bytes("")}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("seq_length must be 8..4096"));
}

// Values the model indexes with are held to what they index: a token id past the vocabulary
// (records written with a larger --vocab), a masked position past the sequence, a mask, token
// type or next-sentence label other than 0 or 1.
TEST(BertRecords, ValuesOutsideWhatTheyIndexAreRefused) {
  const BertRecordShape shape{16, 3, 30522};
  const auto parsed_with = [&](const std::string& feature, size_t i, int64_t value) {
    Element example = synthetic_bert_example(shape, 1);
    example.at(feature).ints.at(i) = value;
    ExampleBuilder b;
    for (const auto& [name, v] : example)
      v.type == FeatureType::kFloat ? b.floats(name, v.floats) : b.ints(name, v.ints);
    return bert_parse_fn(shape)({{"record", scalar_bytes(b.serialize())}});
  };
  EXPECT_TRUE(parsed_with("input_ids", 5, 30521).ok());
  EXPECT_EQ(parsed_with("input_ids", 5, 30522).status().message(),
            "BERT pretraining record: feature 'input_ids' value 5 is 30522, outside [0, 30522) "
            "(the vocabulary's 30522 token ids)");
  EXPECT_THAT(parsed_with("masked_lm_ids", 0, -3).status().message(),
              HasSubstr("feature 'masked_lm_ids' value 0 is -3"));
  EXPECT_THAT(parsed_with("masked_lm_positions", 2, 16).status().message(),
              HasSubstr("outside [0, 16) (a sequence's 16 positions)"));
  for (const char* feature : {"input_mask", "segment_ids", "next_sentence_labels"}) {
    EXPECT_THAT(parsed_with(feature, 0, 2).status().message(),
                HasSubstr(std::string("feature '") + feature + "' value 0 is 2, outside [0, 2)"));
  }
}

TEST(BertRecords, BadFieldsAreRefusedNamingTheFieldAndValue) {
  const auto refused = [](const BertRecordJob& job, const std::string& message) {
    auto done = write_bert_records(job);
    ASSERT_FALSE(done.ok()) << message;
    EXPECT_EQ(done.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(done.status().message(), HasSubstr(message));
  };
  TempDir dir;
  BertRecordJob ok;
  ok.output_dir = (dir.path() / "never").string();
  ok.examples = 4;
  BertRecordJob job = ok;
  job.shape.seq_length = 7;
  refused(job, "seq_length must be 8..4096");
  job.shape.seq_length = 5000;
  refused(job, "not 5000");
  job = ok;
  job.shape.max_predictions = 0;
  refused(job, "max_predictions must be 1..128");
  job.shape.max_predictions = 129;
  refused(job, "not 129");
  job = ok;
  job.shape.vocab = 104;
  refused(job, "vocab must be 105..");
  job = ok;
  job.examples = 0;
  refused(job, "examples must be at least 1, not 0");
  job = ok;
  job.shards = 5;
  refused(job, "shards must be 1..4");
  job.shards = 0;
  refused(job, "not 0");
  job = ok;
  job.prefix = "a/b";
  refused(job, "prefix must be a file name prefix (no '/', not . or ..), not 'a/b'");
  job.prefix = "..";
  refused(job, "not '..'");
  job = ok;
  job.compression = Compression::kAuto;
  refused(job, "compression must be none, gzip or zlib");
  job = ok;
  job.threads = -1;
  refused(job, "threads must be 0 or more, not -1");
  job = ok;
  job.output_dir.clear();
  refused(job, "output_dir must not be empty");
  EXPECT_FALSE(std::filesystem::exists(ok.output_dir));  // refused before anything is written
}

TEST(BertRecords, DefaultMaxPredictionsFollowsBertsSettings) {
  EXPECT_EQ(bert_default_max_predictions(128), 20);  // ceil(19.2), BERT's README
  EXPECT_EQ(bert_default_max_predictions(512), 76);  // MLPerf BERT's max_predictions_per_seq
  EXPECT_EQ(bert_default_max_predictions(64), 10);   // ceil(9.6)
  EXPECT_EQ(bert_default_max_predictions(8), 2);     // ceil(1.2)
  EXPECT_EQ(bert_default_max_predictions(100), 15);  // exactly 15
}

}  // namespace bert_records_test
}  // namespace tpusim::runtime::data
