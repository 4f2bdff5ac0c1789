#include "runtime/models/bert.h"

#include <cmath>
#include <optional>

#include "common/strings.h"
#include "runtime/data/bert_records.h"
#include "runtime/graph/layers.h"

namespace tpusim::runtime::models {
namespace {

using layers::Activation;

// modeling.py's attention mask adder: -10000 where the key is padding.
constexpr float kMaskAdder = -10000.0f;
// run_pretraining.py's denominator guard for the masked-LM loss.
constexpr float kLabelWeightGuard = 1e-5f;

// Draws the model's weights: each from its own seed, truncated normal (create_initializer).
struct Weights {
  const BertConfig& config;
  uint64_t next_seed;
  Initializer next() {
    return Initializer{InitKind::kTruncatedNormal, 0, config.initializer_range, next_seed++};
  }
};

// The float type the model computes in: bf16 under mixed_bfloat16's scope, else f32.
DType compute_type(GraphBuilder& b) { return b.in_bfloat16_scope() ? DType::kBF16 : DType::kF32; }

Value as_type(GraphBuilder& b, Value v, DType t) {
  return v.valid() && v.dtype() != t ? b.cast(v, t) : v;
}

// modeling.py's dropout then layer norm (layer_norm_and_dropout applies them the other way
// round only at the embeddings; each sublayer is LN(x + dropout(h))).
Value add_and_norm(GraphBuilder& b, Value residual, Value h, const BertConfig& c, bool training,
                   Weights& w) {
  h = layers::dropout(b, h, c.dropout, training, w.next_seed++);
  return layers::layer_normalization(b, residual + h);
}

// embedding_lookup + embedding_postprocessor: [batch * seq, hidden].
Value embeddings(GraphBuilder& b, const BertConfig& c, const BertFeatures& f, bool training,
                 Weights& w, Value* word_table) {
  GraphBuilder::Scope scope(b, "embeddings");
  const int64_t batch = f.input_ids.shape().dim(0), seq = f.input_ids.shape().dim(1);
  const DType t = compute_type(b);
  *word_table = b.variable("bert/embeddings/word_embeddings", t, {c.vocab, c.hidden}, w.next());
  Value x = b.gather(*word_table, b.reshape(f.input_ids, {batch * seq}));
  // Two segment types: a one-hot matmul, as modeling.py does for small vocabularies.
  const Value types =
      b.variable("bert/embeddings/token_type_embeddings", t, {c.type_vocab, c.hidden}, w.next());
  const Value one_hot =
      as_type(b, b.one_hot(b.reshape(f.segment_ids, {batch * seq}), c.type_vocab), t);
  x = x + b.matmul(one_hot, types);
  const Value positions =
      b.variable("bert/embeddings/position_embeddings", t, {c.max_position, c.hidden}, w.next());
  const Value first = b.slice(positions, {0, 0}, {seq, c.hidden});
  x = b.reshape(b.reshape(x, {batch, seq, c.hidden}) + first, {batch * seq, c.hidden});
  x = layers::layer_normalization(b, x);
  return layers::dropout(b, x, c.dropout, training, w.next_seed++);
}

// create_attention_mask_from_input_mask, as the adder: (1 - mask) * -10000 over the keys,
// [batch, 1, 1, seq] in the compute type; the scores' add broadcasts it over heads and queries
// (XLA fuses that broadcast into the add: no [batch, heads, seq, seq] mask is ever stored).
Value attention_adder(GraphBuilder& b, Value input_mask) {
  const int64_t batch = input_mask.shape().dim(0), seq = input_mask.shape().dim(1);
  const Value adder = (1.0f - b.cast(input_mask, DType::kF32)) * kMaskAdder;  // [batch, seq]
  return b.reshape(as_type(b, adder, compute_type(b)), {batch, 1, 1, seq});
}

// attention_layer: [batch * seq, hidden] -> the attended context, [batch * seq, hidden].
Value self_attention(GraphBuilder& b, const BertConfig& c, Value x, Value adder, int64_t batch,
                     int64_t seq, bool training, Weights& w) {
  GraphBuilder::Scope scope(b, "self");
  const int64_t dh = c.hidden / c.heads;
  // [batch * seq, hidden] -> [batch, heads, seq, dh] (transpose_for_scores).
  auto heads_of = [&](Value v) {
    return b.transpose(b.reshape(v, {batch, seq, c.heads, dh}), {0, 2, 1, 3});
  };
  const Value q = heads_of(layers::dense(b, x, c.hidden, Activation::kNone, w.next()));
  const Value k = heads_of(layers::dense(b, x, c.hidden, Activation::kNone, w.next()));
  const Value v = heads_of(layers::dense(b, x, c.hidden, Activation::kNone, w.next()));
  Value scores = b.matmul(q, b.transpose(k, {0, 1, 3, 2}));
  scores = scores * (1.0f / std::sqrt(static_cast<float>(dh))) + adder;
  Value probs = layers::softmax(scores);
  probs = layers::dropout(b, probs, c.dropout, training, w.next_seed++);
  const Value context = b.matmul(probs, v);  // [batch, heads, seq, dh]
  return b.reshape(b.transpose(context, {0, 2, 1, 3}), {batch * seq, c.hidden});
}

// One transformer layer (modeling.py's transformer_model loop body).
Value encoder_layer(GraphBuilder& b, const BertConfig& c, Value x, Value adder, int64_t batch,
                    int64_t seq, bool training, Weights& w) {
  Value attention;
  {
    GraphBuilder::Scope scope(b, "attention");
    attention = self_attention(b, c, x, adder, batch, seq, training, w);
    attention = layers::dense(b, attention, c.hidden, Activation::kNone, w.next());
    attention = add_and_norm(b, x, attention, c, training, w);
  }
  GraphBuilder::Scope scope(b, "ffn");
  const Value inner =
      layers::gelu(layers::dense(b, attention, c.intermediate, Activation::kNone, w.next()));
  const Value out = layers::dense(b, inner, c.hidden, Activation::kNone, w.next());
  return add_and_norm(b, attention, out, c, training, w);
}

// gather_indexes: the rows of the flattened sequence [batch * seq, hidden] that `positions`
// [batch, P] name, offset by each example's first row. The offsets are added in f32 (exact: a
// batch's rows stay far below 2^24), where XLA adds s32 on the vector unit: the same work.
Value gather_positions(GraphBuilder& b, Value sequence, Value positions, int64_t seq) {
  const int64_t batch = positions.shape().dim(0), per = positions.shape().dim(1);
  HostTensor offsets = HostTensor::zeros(DType::kF32, Shape{batch, 1});
  for (int64_t i = 0; i < batch; ++i)
    offsets.f[static_cast<size_t>(i)] = static_cast<float>(i * seq);
  const Value starts = b.constant(std::move(offsets));  // first (builder.h: node order)
  const Value flat = b.cast(positions, DType::kF32) + starts;
  return b.gather(sequence, b.reshape(b.cast(flat, DType::kS32), {batch * per}));
}

// get_masked_lm_output: the loss and log-probabilities over the vocabulary.
void masked_lm_head(GraphBuilder& b, const BertConfig& c, Value sequence, Value word_table,
                    const BertFeatures& f, Weights& w, BertOutputs* out) {
  GraphBuilder::Scope scope(b, "cls/predictions");
  const int64_t seq = f.input_ids.shape().dim(1);
  Value h = gather_positions(b, sequence, f.masked_lm_positions, seq);
  h = layers::gelu(layers::dense(b, h, c.hidden, Activation::kNone, w.next()));
  h = layers::layer_normalization(b, h);
  const Value bias =
      b.variable("cls/predictions/output_bias", compute_type(b), {c.vocab}, Initializer{});
  const Value logits = b.matmul(h, b.transpose(word_table, {1, 0})) + bias;
  out->masked_lm_log_probs = layers::log_softmax(as_type(b, logits, DType::kF32));
  const int64_t n = f.masked_lm_ids.shape().dim(0) * f.masked_lm_ids.shape().dim(1);
  const Value one_hot = b.one_hot(b.reshape(f.masked_lm_ids, {n}), c.vocab);
  out->masked_lm_example_loss = -b.reduce(Op::kReduceSum, out->masked_lm_log_probs * one_hot, {1});
  const Value weights = b.reshape(f.masked_lm_weights, {n});
  const Value numerator = b.reduce(Op::kReduceSum, weights * out->masked_lm_example_loss, {0});
  const Value denominator = b.reduce(Op::kReduceSum, weights, {0}) + kLabelWeightGuard;
  out->masked_lm_loss = numerator / denominator;
}

// get_next_sentence_output: the loss and log-probabilities of "B follows A".
void next_sentence_head(GraphBuilder& b, const BertConfig& c, Value pooled, Value labels,
                        Weights& w, BertOutputs* out) {
  GraphBuilder::Scope scope(b, "cls/seq_relationship");
  const DType t = compute_type(b);
  const Value weights =
      b.variable("cls/seq_relationship/output_weights", t, {2, c.hidden}, w.next());
  const Value bias = b.variable("cls/seq_relationship/output_bias", t, {2}, Initializer{});
  const Value logits = b.matmul(pooled, b.transpose(weights, {1, 0})) + bias;
  out->next_sentence_log_probs = layers::log_softmax(as_type(b, logits, DType::kF32));
  const int64_t batch = pooled.shape().dim(0);
  const Value one_hot = b.one_hot(b.reshape(labels, {batch}), 2);
  out->next_sentence_example_loss =
      -b.reduce(Op::kReduceSum, out->next_sentence_log_probs * one_hot, {1});
  out->next_sentence_loss = layers::reduce_mean(out->next_sentence_example_loss, {0});
}

// A feature's shape and dtype, or why not: "masked_lm_ids: s32 [8, 20] expected, got ...".
absl::Status check_feature(const char* name, Value v, DType dtype, const Shape& want) {
  if (!v.valid()) return absl::InvalidArgumentError(str_cat("BERT feature ", name, " is missing"));
  if (v.dtype() != dtype || v.shape().elements() != want.elements() ||
      v.shape().dim(0) != want.dim(0)) {
    return absl::InvalidArgumentError(str_cat("BERT feature ", name, ": ", dtype_name(dtype),
                                              want.str(), " expected, got ", dtype_name(v.dtype()),
                                              v.shape().str()));
  }
  return absl::OkStatus();
}

absl::Status check_features(const BertConfig& c, const BertFeatures& f) {
  if (!f.input_ids.valid() || f.input_ids.shape().rank() != 2)
    return absl::InvalidArgumentError("BERT feature input_ids must be s32 [batch, seq_length]");
  const int64_t batch = f.input_ids.shape().dim(0), seq = f.input_ids.shape().dim(1);
  if (seq > c.max_position) {
    return absl::InvalidArgumentError(str_cat(c.name, " takes sequences of at most ",
                                              c.max_position,
                                              " tokens (max_position_embeddings); "
                                              "input_ids has ",
                                              seq));
  }
  if (!f.masked_lm_positions.valid() || f.masked_lm_positions.shape().rank() != 2)
    return absl::InvalidArgumentError(
        "BERT feature masked_lm_positions must be s32 [batch, max_predictions]");
  const int64_t per = f.masked_lm_positions.shape().dim(1);
  const std::pair<const char*, Value> sequences[] = {
      {"input_ids", f.input_ids}, {"input_mask", f.input_mask}, {"segment_ids", f.segment_ids}};
  for (const auto& [name, v] : sequences) {
    if (auto s = check_feature(name, v, DType::kS32, Shape{batch, seq}); !s.ok()) return s;
  }
  const std::pair<const char*, Value> predictions[] = {
      {"masked_lm_positions", f.masked_lm_positions}, {"masked_lm_ids", f.masked_lm_ids}};
  for (const auto& [name, v] : predictions) {
    if (auto s = check_feature(name, v, DType::kS32, Shape{batch, per}); !s.ok()) return s;
  }
  if (auto s =
          check_feature("masked_lm_weights", f.masked_lm_weights, DType::kF32, Shape{batch, per});
      !s.ok())
    return s;
  return check_feature("next_sentence_labels", f.next_sentence_labels, DType::kS32, Shape{batch});
}

}  // namespace

absl::StatusOr<BertConfig> bert_config(const std::string& name) {
  BertConfig c;
  c.name = name;
  if (name == "bert_large") {
    c.hidden = 1024, c.layers = 24, c.heads = 16, c.intermediate = 4096;
  } else if (name == "bert_base") {
    c.hidden = 768, c.layers = 12, c.heads = 12, c.intermediate = 3072;
  } else if (name == "bert_tiny") {
    c.hidden = 128, c.layers = 2, c.heads = 2, c.intermediate = 512;
  } else {
    return absl::NotFoundError(
        str_cat("no BERT named '", name, "' (bert_large, bert_base or bert_tiny)"));
  }
  return c;
}

bool is_bert(const std::string& name) { return bert_config(name).ok(); }

int64_t bert_max_predictions(int64_t seq_length) {
  return data::bert_default_max_predictions(static_cast<int>(seq_length));  // the records' rule
}

BertFeatures bert_infeeds(GraphBuilder& b, int64_t batch, int64_t seq_length) {
  const int64_t per = bert_max_predictions(seq_length);
  BertFeatures f;
  f.input_ids = b.infeed("input_ids", DType::kS32, {batch, seq_length});
  f.input_mask = b.infeed("input_mask", DType::kS32, {batch, seq_length});
  f.segment_ids = b.infeed("segment_ids", DType::kS32, {batch, seq_length});
  f.masked_lm_positions = b.infeed("masked_lm_positions", DType::kS32, {batch, per});
  f.masked_lm_ids = b.infeed("masked_lm_ids", DType::kS32, {batch, per});
  f.masked_lm_weights = b.infeed("masked_lm_weights", DType::kF32, {batch, per});
  f.next_sentence_labels = b.infeed("next_sentence_labels", DType::kS32, {batch});
  return f;
}

absl::StatusOr<BertOutputs> build_bert_pretraining(GraphBuilder& b, const BertConfig& c,
                                                   const BertFeatures& f, bool training,
                                                   uint64_t seed, DTypePolicy policy) {
  if (auto s = check_features(c, f); !s.ok()) return s;
  const int64_t batch = f.input_ids.shape().dim(0), seq = f.input_ids.shape().dim(1);
  Weights w{c, seed};
  BertOutputs out;
  Value sequence, pooled, word_table;
  {
    std::optional<GraphBuilder::BFloat16Scope> bf16_scope;
    if (policy == DTypePolicy::kMixedBFloat16) bf16_scope.emplace(b);
    GraphBuilder::Scope bert(b, "bert");
    Value x = embeddings(b, c, f, training, w, &word_table);
    const Value adder = attention_adder(b, f.input_mask);
    for (int64_t i = 0; i < c.layers; ++i) {
      GraphBuilder::Scope layer(b, str_cat("layer_", i));
      x = encoder_layer(b, c, x, adder, batch, seq, training, w);
    }
    sequence = x;  // [batch * seq, hidden]
    GraphBuilder::Scope pooler(b, "pooler");
    const Value first =
        b.reshape(b.slice(b.reshape(x, {batch, seq, c.hidden}), {0, 0, 0}, {batch, 1, c.hidden}),
                  {batch, c.hidden});
    pooled = layers::dense(b, first, c.hidden, Activation::kTanh, w.next());
    masked_lm_head(b, c, sequence, word_table, f, w, &out);
    next_sentence_head(b, c, pooled, f.next_sentence_labels, w, &out);
  }
  out.loss = out.masked_lm_loss + out.next_sentence_loss;
  if (!b.status().ok()) return b.status();
  return out;
}

}  // namespace tpusim::runtime::models
