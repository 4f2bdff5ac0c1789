#pragma once
// BERT pretraining data as google-research/bert writes and reads it: TFRecord files of tf.Example
// with create_pretraining_data.py's features, parsed with run_pretraining.py's name_to_features,
// made here from synthetic token ids (no corpus, no tokenizer) for performance runs.
//
//   input_ids, input_mask, segment_ids   int64 [seq_length]
//   masked_lm_positions, masked_lm_ids   int64 [max_predictions]
//   masked_lm_weights                    float [max_predictions]
//   next_sentence_labels                 int64 [1]
//
// An example is [CLS] A [SEP] B [SEP] then [PAD]s, laid out as create_pretraining_data.py does:
// - lengths: A and B together fill seq_length - 3 tokens, except 10% of the time (short_seq_prob)
//   a length drawn from [2, seq_length - 3]; A takes [1, total - 1] of them, B the rest;
// - input_mask 1 over the real tokens, 0 over the padding; segment_ids 0 for [CLS] A [SEP], 1 for
//   B [SEP], 0 over the padding;
// - masked: min(max_predictions, max(1, round(real tokens * 0.15))) positions (round as Python's,
//   half to even; real tokens count [CLS] and the [SEP]s as BERT does), drawn among A's and B's
//   tokens, ascending; of them 80% become [MASK], 10% stay, 10% a random ordinary token;
//   masked_lm_ids the tokens they held, masked_lm_weights 1.0; padded with position 0, id 0 and
//   weight 0.0;
// - next_sentence_labels 1 when B is "random next", 0 when it is the actual next (50% each).
// Ids as BERT's uncased vocab: [PAD] 0, [CLS] 101, [SEP] 102, [MASK] 103; ordinary tokens drawn
// from [999, vocab), or from [104, vocab) when vocab <= 999.
//
// Randomness: example i of a job is made from seed + i alone, with std::mt19937_64 and draws of
// our own (no std:: distributions, whose algorithms differ between standard libraries), so the
// bytes depend on neither the thread count nor the sharding nor the platform.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/data/dataset.h"
#include "runtime/data/example.h"
#include "runtime/data/shard_files.h"
#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

// Bounds: seq_length 8..4096 (room for [CLS] A [SEP] B [SEP] with a few tokens each; 4096 is 8x
// BERT's 512 position embeddings), max_predictions 1..seq_length, vocab 105..2^31-1 (the special
// ids 0..103 and at least one ordinary token).
struct BertRecordShape {
  int seq_length = 128;      // tokens per example (max_seq_length)
  int max_predictions = 20;  // masked positions per example (max_predictions_per_seq)
  int vocab = 30522;         // token ids in [0, vocab)
};

constexpr int64_t kBertPadId = 0, kBertClsId = 101, kBertSepId = 102, kBertMaskId = 103;

// Ok, or an InvalidArgument error naming the field, its value and its bounds.
absl::Status check_bert_shape(const BertRecordShape& shape);

// The max_predictions to use when none is given: 76 at seq_length 512 (MLPerf BERT's
// max_predictions_per_seq), else ceil(0.15 * seq_length) (20 at 128, as BERT's README).
int bert_default_max_predictions(int seq_length);

// google-research/bert run_pretraining.py's name_to_features: input_ids, input_mask, segment_ids
// int64 [seq_length]; masked_lm_positions, masked_lm_ids int64 [max_predictions];
// masked_lm_weights float [max_predictions]; next_sentence_labels int64 [1].
FeatureSpec bert_feature_spec(const BertRecordShape& shape);

// One synthetic pretraining example (as the header comment lays it out) from `rng_seed`, its
// features shaped as the spec. A shape check_bert_shape refuses gives an empty Element.
Element synthetic_bert_example(const BertRecordShape& shape, uint64_t rng_seed);

// A whole batch [batch, ...] of synthetic examples (example i from seed + i), for --input
// synthetic: next_sentence_labels is [batch, 1], as Dataset::batch stacks parsed examples. A
// refused shape or batch < 1 gives an empty Element.
Element synthetic_bert_batch(const BertRecordShape& shape, int64_t batch, uint64_t seed);

struct BertRecordJob {
  BertRecordShape shape;
  std::string output_dir;  // created when missing
  std::string prefix = "train";
  int64_t examples = 1024;                       // 1 or more
  int shards = 1;                                // 1..examples
  Compression compression = Compression::kNone;  // none, gzip or zlib
  uint64_t seed = 1;
  int threads = 0;  // as IdxConversion: shards written at once (0: one per core); bytes independent
};

struct BertRecordResult {
  uint64_t examples = 0;
  std::vector<std::string> shard_paths;
  std::vector<uint64_t> shard_examples;
  uint64_t bytes = 0;  // of the files written (after compression)
};

// Ok, or an InvalidArgument error naming the field, its value and its bounds.
absl::Status check_bert_job(const BertRecordJob& job);

// Writes `examples` synthetic examples (example i from seed + i) into `shards` files named by
// shard_name(), shard s holding shard_range(examples, s, shards), in order.
absl::StatusOr<BertRecordResult> write_bert_records(const BertRecordJob& job);

// Dataset map from {"record": bytes} to the 7 features (int64 and float FeatureValues shaped as
// the spec). Errors name the feature and the problem.
MapFn bert_parse_fn(const BertRecordShape& shape);

}  // namespace tpusim::runtime::data
