#include "runtime/data/bert_records.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "common/strings.h"

namespace tpusim::runtime::data {
namespace {

constexpr int kMinSeqLength = 8, kMaxSeqLength = 4096;
constexpr int kMinVocab = static_cast<int>(kBertMaskId) + 2;  // the special ids and one token
constexpr int64_t kFirstOrdinaryId = 999;  // after [unused]s and the uncased vocab's symbols
constexpr double kShortSeqProb = 0.1;      // create_pretraining_data.py's short_seq_prob
constexpr double kMaskedLmProb = 0.15;     // and masked_lm_prob

// Uniform in [0, n), n > 0, without bias: draws below 2^64 mod n are rejected, so what is left is
// a whole number of copies of [0, n).
uint64_t below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t reject = (0 - n) % n;
  for (;;) {
    const uint64_t x = rng();
    if (x >= reject) return x % n;
  }
}

// Uniform in [lo, hi], lo <= hi.
int64_t between(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(below(rng, static_cast<uint64_t>(hi - lo) + 1));
}

// Uniform in [0, 1): the top 53 bits.
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// An ordinary (not special) token id, uniform in [999, vocab), or [104, vocab) for a small vocab.
int64_t ordinary_token(std::mt19937_64& rng, int vocab) {
  return between(rng, vocab > kFirstOrdinaryId ? kFirstOrdinaryId : kBertMaskId + 1, vocab - 1);
}

FeatureValue ints_value(std::vector<int64_t> values, std::vector<int64_t> shape) {
  FeatureValue v;
  v.type = FeatureType::kInt64;
  v.shape = std::move(shape);
  v.ints = std::move(values);
  return v;
}

// The tokens of one example before masking: [CLS] A [SEP] B [SEP], then padding.
struct Sentences {
  std::vector<int64_t> ids, mask, segments;
  int64_t len_a = 0, real = 0;
  bool random_next = false;
};

Sentences draw_sentences(const BertRecordShape& shape, std::mt19937_64& rng) {
  const int64_t length = shape.seq_length, max_tokens = length - 3;
  int64_t target = max_tokens;
  if (unit(rng) < kShortSeqProb) target = between(rng, 2, max_tokens);
  Sentences s;
  s.len_a = between(rng, 1, target - 1);
  s.real = target + 3;
  s.random_next = unit(rng) < 0.5;
  s.ids.assign(static_cast<size_t>(length), kBertPadId);
  s.mask.assign(static_cast<size_t>(length), 0);
  s.segments.assign(static_cast<size_t>(length), 0);
  for (int64_t i = 0; i < s.real; ++i) {
    const bool sep = i == s.len_a + 1 || i == s.real - 1;
    s.ids[i] = i == 0 ? kBertClsId : sep ? kBertSepId : ordinary_token(rng, shape.vocab);
    s.mask[i] = 1;
    s.segments[i] = i > s.len_a + 1 ? 1 : 0;
  }
  return s;
}

// Masks some of A's and B's tokens in `s.ids` as create_masked_lm_predictions does, and adds the
// masked_lm_* features to `out`.
void mask_tokens(const BertRecordShape& shape, std::mt19937_64& rng, Sentences& s, Element& out) {
  std::vector<int64_t> candidates;
  for (int64_t i = 1; i < s.real - 1; ++i) {
    if (i != s.len_a + 1) candidates.push_back(i);
  }
  // Python's round(), half to even: nearbyint in the default rounding mode, on the same double.
  const auto wanted =
      static_cast<int64_t>(std::nearbyint(static_cast<double>(s.real) * kMaskedLmProb));
  const int64_t count =
      std::min({static_cast<int64_t>(shape.max_predictions), std::max<int64_t>(1, wanted),
                static_cast<int64_t>(candidates.size())});
  for (int64_t k = 0; k < count; ++k) {  // the first `count` of a Fisher-Yates shuffle
    const auto j =
        k + static_cast<int64_t>(below(rng, candidates.size() - static_cast<uint64_t>(k)));
    std::swap(candidates[k], candidates[j]);
  }
  std::sort(candidates.begin(), candidates.begin() + count);
  const auto predictions = static_cast<size_t>(shape.max_predictions);
  std::vector<int64_t> positions(predictions, 0), labels(predictions, kBertPadId);
  FeatureValue weights;
  weights.type = FeatureType::kFloat;
  weights.shape = {shape.max_predictions};
  weights.floats.assign(predictions, 0.0F);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t p = candidates[k];
    positions[k] = p;
    labels[k] = s.ids[p];
    weights.floats[k] = 1.0F;
    if (unit(rng) < 0.8) {
      s.ids[p] = kBertMaskId;
    } else if (unit(rng) >= 0.5) {  // else (the other 10%) it keeps its token
      s.ids[p] = ordinary_token(rng, shape.vocab);
    }
  }
  out.emplace("masked_lm_positions", ints_value(std::move(positions), {shape.max_predictions}));
  out.emplace("masked_lm_ids", ints_value(std::move(labels), {shape.max_predictions}));
  out.emplace("masked_lm_weights", std::move(weights));
}

std::string serialize(const Element& e) {
  ExampleBuilder b;
  for (const auto& [name, v] : e) {
    v.type == FeatureType::kFloat ? b.floats(name, v.floats) : b.ints(name, v.ints);
  }
  return b.serialize();
}

absl::Status out_of_range(const char* field, int64_t value, int64_t lo, int64_t hi,
                          const char* why) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      str_cat(field, " must be ", lo, "..", hi, " (", why, "), not ", value));
}

struct BertShardWritten {
  uint64_t examples = 0, bytes = 0;
};

absl::StatusOr<BertShardWritten> write_bert_shard(const BertRecordJob& job, const std::string& path,
                                                  uint64_t first, uint64_t end) {
  auto writer = TFRecordWriter::open(path, job.compression);
  if (!writer.ok()) return writer.status();
  for (uint64_t i = first; i < end; ++i) {
    if (auto s = (*writer)->write(serialize(synthetic_bert_example(job.shape, job.seed + i)));
        !s.ok()) {
      return s;
    }
  }
  if (auto s = (*writer)->close(); !s.ok()) return s;
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  if (ec) return absl::InternalError(str_cat("cannot stat ", path, ": ", ec.message()));
  return BertShardWritten{end - first, bytes};
}

}  // namespace

absl::Status check_bert_shape(const BertRecordShape& shape) {
  if (auto s = out_of_range("seq_length", shape.seq_length, kMinSeqLength, kMaxSeqLength,
                            "[CLS] A [SEP] B [SEP] with a few tokens each, up to 8x BERT's 512");
      !s.ok()) {
    return s;
  }
  if (auto s = out_of_range("max_predictions", shape.max_predictions, 1, shape.seq_length,
                            "at least one masked position, at most seq_length");
      !s.ok()) {
    return s;
  }
  return out_of_range("vocab", shape.vocab, kMinVocab, std::numeric_limits<int>::max(),
                      "[PAD] 0, [CLS] 101, [SEP] 102, [MASK] 103 and an ordinary token");
}

int bert_default_max_predictions(int seq_length) {
  if (seq_length == 512) return 76;
  return std::max(1, static_cast<int>((15 * static_cast<int64_t>(seq_length) + 99) / 100));
}

FeatureSpec bert_feature_spec(const BertRecordShape& shape) {
  const std::vector<int64_t> tokens = {shape.seq_length}, predictions = {shape.max_predictions};
  FeatureSpec spec;
  const std::string vocab = str_cat("the vocabulary's ", shape.vocab, " token ids");
  const auto ints = [](std::vector<int64_t> dims) {
    return fixed_len(FeatureType::kInt64, std::move(dims));
  };
  spec["input_ids"] = in_range(ints(tokens), 0, shape.vocab, vocab);
  spec["input_mask"] = in_range(ints(tokens), 0, 2, "a mask: 1 a token, 0 padding");
  spec["segment_ids"] = in_range(ints(tokens), 0, 2, "BERT's 2 token types");
  spec["masked_lm_positions"] = in_range(ints(predictions), 0, shape.seq_length,
                                         str_cat("a sequence's ", shape.seq_length, " positions"));
  spec["masked_lm_ids"] = in_range(ints(predictions), 0, shape.vocab, vocab);
  spec["masked_lm_weights"] = fixed_len(FeatureType::kFloat, predictions);
  spec["next_sentence_labels"] = in_range(ints({1}), 0, 2, "is-next 0 or random-next 1");
  return spec;
}

Element synthetic_bert_example(const BertRecordShape& shape, uint64_t rng_seed) {
  if (!check_bert_shape(shape).ok()) return {};
  std::mt19937_64 rng(rng_seed);
  Sentences s = draw_sentences(shape, rng);
  Element out;
  mask_tokens(shape, rng, s, out);
  const std::vector<int64_t> tokens = {shape.seq_length};
  out.emplace("input_ids", ints_value(std::move(s.ids), tokens));
  out.emplace("input_mask", ints_value(std::move(s.mask), tokens));
  out.emplace("segment_ids", ints_value(std::move(s.segments), tokens));
  out.emplace("next_sentence_labels", ints_value({s.random_next ? 1 : 0}, {1}));
  return out;
}

Element synthetic_bert_batch(const BertRecordShape& shape, int64_t batch, uint64_t seed) {
  if (batch < 1 || !check_bert_shape(shape).ok()) return {};
  Element out;
  for (int64_t i = 0; i < batch; ++i) {
    for (auto& [name, v] : synthetic_bert_example(shape, seed + static_cast<uint64_t>(i))) {
      auto [it, first] = out.try_emplace(name);
      FeatureValue& b = it->second;
      if (first) {
        b.type = v.type;
        b.shape = {batch};
        b.shape.insert(b.shape.end(), v.shape.begin(), v.shape.end());
      }
      b.ints.insert(b.ints.end(), v.ints.begin(), v.ints.end());
      b.floats.insert(b.floats.end(), v.floats.begin(), v.floats.end());
    }
  }
  return out;
}

absl::Status check_bert_job(const BertRecordJob& job) {
  if (auto s = check_bert_shape(job.shape); !s.ok()) return s;
  if (job.output_dir.empty()) return absl::InvalidArgumentError("output_dir must not be empty");
  if (job.examples < 1)
    return absl::InvalidArgumentError(str_cat("examples must be at least 1, not ", job.examples));
  // An example's input_ids, input_mask and segment_ids take a byte a token at least.
  const auto examples = static_cast<uint64_t>(job.examples);
  if (auto s = check_shard_plan(job.prefix, "prefix", job.shards, examples,
                                3 * static_cast<uint64_t>(job.shape.seq_length), job.output_dir);
      !s.ok()) {
    return s;
  }
  if (job.compression == Compression::kAuto) {
    return absl::InvalidArgumentError("compression must be none, gzip or zlib, not auto");
  }
  if (job.threads < 0)
    return absl::InvalidArgumentError(str_cat("threads must be 0 or more, not ", job.threads));
  return absl::OkStatus();
}

absl::StatusOr<BertRecordResult> write_bert_records(const BertRecordJob& job) {
  if (auto s = check_bert_job(job); !s.ok()) return s;
  if (auto s = make_output_dir(job.output_dir); !s.ok()) return s;
  const auto count = static_cast<uint64_t>(job.examples);
  std::vector<BertShardWritten> shards(static_cast<size_t>(job.shards));
  BertRecordResult result;
  for (int sh = 0; sh < job.shards; ++sh) {
    result.shard_paths.push_back((std::filesystem::path(job.output_dir) /
                                  shard_name(job.prefix, sh, job.shards, job.compression))
                                     .string());
  }
  auto write = [&](int sh) -> absl::Status {
    const auto [first, end] = shard_range(count, sh, job.shards);
    auto written = write_bert_shard(job, result.shard_paths[static_cast<size_t>(sh)], first, end);
    if (!written.ok()) return written.status();
    shards[static_cast<size_t>(sh)] = *written;
    return absl::OkStatus();
  };
  if (auto s = write_shards_in_parallel(job.shards, job.threads, write); !s.ok()) return s;
  for (const auto& shard : shards) {
    result.shard_examples.push_back(shard.examples);
    result.bytes += shard.bytes;
  }
  result.examples = count;
  return result;
}

MapFn bert_parse_fn(const BertRecordShape& shape) {
  const absl::Status valid = check_bert_shape(shape);
  const FeatureSpec spec = bert_feature_spec(shape);
  return [valid, spec](Element in) -> absl::StatusOr<Element> {
    if (!valid.ok()) return absl::InvalidArgumentError(str_cat("bert_parse_fn: ", valid.message()));
    const auto record = in.find("record");
    if (record == in.end() || record->second.bytes.size() != 1) {
      return absl::InvalidArgumentError("bert_parse_fn: the element has no scalar 'record'");
    }
    return parse_example(record->second.bytes[0], spec, "BERT pretraining record");
  };
}

}  // namespace tpusim::runtime::data
