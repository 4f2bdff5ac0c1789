#pragma once
// BERT pretraining as google-research/bert builds it (modeling.py's BertModel, run_pretraining.py's
// masked-LM and next-sentence heads), over the features run_pretraining.py reads:
//
//   input_ids, input_mask, segment_ids   s32 [batch, seq_length]
//   masked_lm_positions, masked_lm_ids   s32 [batch, max_predictions]
//   masked_lm_weights                    f32 [batch, max_predictions]
//   next_sentence_labels                 s32 [batch] (or [batch, 1], as the records hold it)
//
// The encoder: token embeddings (a gather from the [vocab, hidden] table; its gradient a
// scatter-add), segment embeddings (a one-hot matmul, as modeling.py does for its 2 types),
// position embeddings (the first seq_length rows of [512, hidden]), layer norm (epsilon 1e-12)
// and dropout 0.1; `layers` transformer layers (self-attention with the input mask as a -10000
// adder, dropout 0.1 on the attention probabilities, GELU feed-forward of `intermediate`); the
// pooler (the first token through a tanh dense). Every weight is truncated normal with stddev
// 0.02 (initializer_range), biases zeros. The heads: the masked-LM transform (dense GELU, layer
// norm) of the gathered masked positions, logits against the token table (tied) plus a bias,
// the loss the weighted mean of -log p(label); next-sentence logits from the pooled output, the
// loss the batch mean. The total loss is their sum.
//
// Under mixed_bfloat16 the encoder runs in bf16 (tf.compat.v1.tpu.bfloat16_scope): layer norm
// and softmax in f32, the heads' log-softmax and losses in f32.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/builder.h"
#include "runtime/models/zoo.h"

namespace tpusim::runtime::models {

// BERT's hyperparameters (bert_config.json).
struct BertConfig {
  std::string name;
  int64_t vocab = 30522;
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t intermediate = 3072;
  int64_t max_position = 512;
  int64_t type_vocab = 2;
  float dropout = 0.1f;  // hidden_dropout_prob and attention_probs_dropout_prob
  float initializer_range = 0.02f;
};

// bert_large (24 layers, hidden 1024, 16 heads, 4096), bert_base (12, 768, 12, 3072) and
// bert_tiny (2, 128, 2, 512: Google's smallest published BERT, for tests and quick runs);
// NotFound for any other name.
absl::StatusOr<BertConfig> bert_config(const std::string& name);
bool is_bert(const std::string& name);

// The masked positions per sequence BERT was pretrained with: 20 at length 128, 76 at 512
// (run_pretraining.py's max_predictions_per_seq), ceil(0.15 * length) at any other length.
int64_t bert_max_predictions(int64_t seq_length);

struct BertFeatures {
  Value input_ids, input_mask, segment_ids;
  Value masked_lm_positions, masked_lm_ids, masked_lm_weights;
  Value next_sentence_labels;
};

// The seven features as infeeds of those names, at `batch` x `seq_length` with
// bert_max_predictions(seq_length) masked positions.
BertFeatures bert_infeeds(GraphBuilder& b, int64_t batch, int64_t seq_length);

struct BertOutputs {
  Value loss;  // masked_lm_loss + next_sentence_loss
  Value masked_lm_loss, next_sentence_loss;
  Value masked_lm_log_probs;      // f32 [batch * max_predictions, vocab]
  Value next_sentence_log_probs;  // f32 [batch, 2]
  // -log p(label) of each masked position [batch * max_predictions] and each example [batch]
  // (run_pretraining.py's per_example_loss), unweighted.
  Value masked_lm_example_loss, next_sentence_example_loss;
};

// The pretraining graph of `config` on `f`. Errors (a sequence longer than max_position, features
// of the wrong rank or dtype) name the feature and its shape.
absl::StatusOr<BertOutputs> build_bert_pretraining(GraphBuilder& b, const BertConfig& config,
                                                   const BertFeatures& f, bool training,
                                                   uint64_t seed,
                                                   DTypePolicy policy = DTypePolicy::kFloat32);

}  // namespace tpusim::runtime::models
