// BERT at its published sizes (google-research/bert's BERT-Large and BERT-Base), its features
// checked by name, and a BERT-Tiny pretraining step run on the cpu backend: losses at
// initialisation as a uniform guess, falling with LAMB.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/optimizers.h"
#include "runtime/models/bert.h"

namespace tpusim::runtime::models {
namespace bert_model_test {

using ::testing::HasSubstr;

GraphSize pretraining_size(const std::string& name, int64_t seq) {
  auto config = bert_config(name);
  EXPECT_TRUE(config.ok()) << config.status();
  GraphBuilder b;
  auto out = build_bert_pretraining(b, *config, bert_infeeds(b, 1, seq), /*training=*/false, 1);
  EXPECT_TRUE(out.ok()) << out.status();
  return graph_size(b.graph());
}

// One example's forward matmul FLOPs: per layer the Q, K, V, output and the two feed-forward
// denses over every token, and QK^T and PV; the segment one-hot matmul, the pooler, the
// masked-LM transform and vocabulary logits at `predictions` positions, the next-sentence logits.
double forward_flops(const BertConfig& c, int64_t seq, int64_t predictions) {
  const double h = static_cast<double>(c.hidden), s = static_cast<double>(seq);
  const double layer =
      2 * s * (4 * h * h + 2 * h * static_cast<double>(c.intermediate)) + 2 * (2 * s * s * h);
  const double p = static_cast<double>(predictions);
  return static_cast<double>(c.layers) * layer + 2 * s * 2 * h + 2 * h * h + 2 * p * h * h +
         2 * p * h * static_cast<double>(c.vocab) + 2 * h * 2;
}

// BERT-Large: 335,141,888 parameters in the encoder, embeddings and pooler (the "335M" of the
// paper's 340M-class model as TF-Hub and Hugging Face count it), plus the pretraining heads'
// 1,084,220 (masked-LM transform, layer norm and output bias over 30,522 tokens; next-sentence
// 2 x 1024 + 2).
TEST(BertModel, BertLargeHasItsPublishedSize) {
  const GraphSize s = pretraining_size("bert_large", 512);
  EXPECT_EQ(s.trainable_parameters, 335'141'888 + 1'084'220);
  EXPECT_EQ(s.parameters, s.trainable_parameters);
  EXPECT_DOUBLE_EQ(s.matmul_flops, forward_flops(*bert_config("bert_large"), 512, 76));
  EXPECT_NEAR(s.matmul_flops, 339.9e9, 0.1e9);
}

// BERT-Base: 109,482,240 (the "110M"), plus 622,650 + 1,538 in the heads.
TEST(BertModel, BertBaseHasItsPublishedSize) {
  const GraphSize s = pretraining_size("bert_base", 128);
  EXPECT_EQ(s.trainable_parameters, 109'482'240 + 622'650 + 1'538);
  EXPECT_DOUBLE_EQ(s.matmul_flops, forward_flops(*bert_config("bert_base"), 128, 20));
}

TEST(BertModel, MaskedPositionsFollowThePublishedSettings) {
  EXPECT_EQ(bert_max_predictions(128), 20);
  EXPECT_EQ(bert_max_predictions(512), 76);
  EXPECT_EQ(bert_max_predictions(64), 10);  // ceil(9.6)
  EXPECT_TRUE(is_bert("bert_tiny"));
  EXPECT_FALSE(is_bert("resnet50"));
  EXPECT_THAT(std::string(bert_config("bert_huge").status().message()),
              HasSubstr("bert_large, bert_base or bert_tiny"));
}

TEST(BertModel, BadFeaturesAreRefusedNamingThem) {
  const BertConfig c = *bert_config("bert_tiny");
  {
    GraphBuilder b;
    auto out = build_bert_pretraining(b, c, bert_infeeds(b, 2, 600), true, 1);
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr("at most 512 tokens (max_position_embeddings); input_ids has 600"));
  }
  {
    GraphBuilder b;
    BertFeatures f = bert_infeeds(b, 2, 16);
    f.masked_lm_weights = b.infeed("w", DType::kS32, {2, 3});
    auto out = build_bert_pretraining(b, c, f, true, 1);
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr("masked_lm_weights: f32[2, 3] expected, got s32[2, 3]"));
  }
}

// One batch of BERT-Tiny's features: real tokens then padding, every other sequence half
// padded, 3 masked positions an example (the last one padding, weight 0).
Feeds tiny_batch(int64_t batch, int64_t seq, int64_t per) {
  Feeds feeds;
  std::vector<int32_t> ids, mask, segments, positions, labels, nsp;
  std::vector<float> weights;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t real = i % 2 == 0 ? seq : seq / 2;
    for (int64_t t = 0; t < seq; ++t) {
      ids.push_back(t < real ? static_cast<int32_t>(1000 + (i * 31 + t * 7) % 5000) : 0);
      mask.push_back(t < real ? 1 : 0);
      segments.push_back(t >= real / 2 && t < real ? 1 : 0);
    }
    for (int64_t k = 0; k < per; ++k) {
      positions.push_back(static_cast<int32_t>(k < per - 1 ? 1 + 2 * k : 0));
      labels.push_back(static_cast<int32_t>(k < per - 1 ? 2000 + k : 0));
      weights.push_back(k < per - 1 ? 1.0f : 0.0f);
    }
    nsp.push_back(static_cast<int32_t>(i % 2));
  }
  feeds["input_ids"] = HostTensor::from_ints({batch, seq}, ids);
  feeds["input_mask"] = HostTensor::from_ints({batch, seq}, mask);
  feeds["segment_ids"] = HostTensor::from_ints({batch, seq}, segments);
  feeds["masked_lm_positions"] = HostTensor::from_ints({batch, per}, positions);
  feeds["masked_lm_ids"] = HostTensor::from_ints({batch, per}, labels);
  feeds["masked_lm_weights"] = HostTensor::from({batch, per}, weights);
  feeds["next_sentence_labels"] = HostTensor::from_ints({batch}, nsp);
  return feeds;
}

TEST(BertModel, TinyPretrainingStartsAtAUniformGuessAndLearns) {
  const int64_t batch = 4, seq = 16, per = bert_max_predictions(seq);  // 3
  GraphBuilder b;
  const BertFeatures f = bert_infeeds(b, batch, seq);
  auto out = build_bert_pretraining(b, *bert_config("bert_tiny"), f, /*training=*/true, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = gradients(b, out->loss, vars);
  ASSERT_TRUE(grads.ok()) << grads.status();
  OptimizerSpec lamb = optimizer_defaults(OptimizerSpec::Kind::kLamb);
  lamb.learning_rate.initial = 0.01f;
  lamb.clip_global_norm = 1.0f;
  ASSERT_TRUE(apply_gradients(b, lamb, vars, *grads).ok());
  b.output("masked_lm_loss", out->masked_lm_loss);
  b.output("next_sentence_loss", out->next_sentence_loss);
  ASSERT_TRUE(b.status().ok()) << b.status();
  std::unique_ptr<Backend> backend = make_cpu_backend();
  auto exe = backend->compile(b.graph(), {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Variables variables = initial_variables(b.graph());
  const Feeds feeds = tiny_batch(batch, seq, per);
  std::vector<float> mlm, nsp;
  for (uint64_t step = 0; step < 20; ++step) {
    auto run = backend->run(**exe, variables, {feeds}, step);
    ASSERT_TRUE(run.ok()) << run.status();
    mlm.push_back((*run)[0].at("masked_lm_loss").f[0]);
    nsp.push_back((*run)[0].at("next_sentence_loss").f[0]);
  }
  // Weights of stddev 0.02 give near-uniform predictions: ln(30522) = 10.33 and ln(2) = 0.69,
  // give or take the label logits' spread (stddev ~0.2) over 8 masked and 4 sentence labels.
  EXPECT_NEAR(mlm.front(), std::log(30522.0f), 0.25f);
  EXPECT_NEAR(nsp.front(), std::log(2.0f), 0.25f);
  EXPECT_LT(mlm.back(), mlm.front() - 1.0f);  // the same batch, memorised
}

}  // namespace bert_model_test
}  // namespace tpusim::runtime::models
