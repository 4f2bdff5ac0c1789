#include "runtime/models/zoo.h"

#include <optional>

#include "common/strings.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/layers.h"
#include "runtime/models/bert.h"

namespace tpusim::runtime::models {
namespace {

using layers::Activation;
using layers::flatten;
using layers::Padding;

constexpr int64_t kImageNetClasses = 1000;

Value mlp(GraphBuilder& b, Value images, uint64_t seed) {
  Value h = layers::dense(b, flatten(b, images), 256, Activation::kRelu, seed);
  h = layers::dense(b, h, 128, Activation::kRelu, seed + 1);
  return layers::dense(b, h, 10, Activation::kNone, seed + 2);
}

Value mnist_cnn(GraphBuilder& b, Value images, bool training, uint64_t seed) {
  Value h = layers::conv2d(b, images, 32, 5, 1, Padding::kSame, Activation::kRelu, seed);
  h = layers::max_pooling2d(b, h, 2, 2);
  h = layers::conv2d(b, h, 64, 5, 1, Padding::kSame, Activation::kRelu, seed + 1);
  h = layers::max_pooling2d(b, h, 2, 2);
  h = layers::dense(b, flatten(b, h), 128, Activation::kRelu, seed + 2);
  h = layers::dropout(b, h, 0.4f, training, seed + 3);
  return layers::dense(b, h, 10, Activation::kNone, seed + 4);
}

Value residual_block(GraphBuilder& b, Value x, int64_t filters, int64_t stride, bool training,
                     uint64_t seed) {
  Value h = layers::conv2d(b, x, filters, 3, stride, Padding::kSame, Activation::kNone, seed);
  h = b.unary(Op::kRelu, layers::batch_normalization(b, h, training));
  h = layers::conv2d(b, h, filters, 3, 1, Padding::kSame, Activation::kNone, seed + 1);
  h = layers::batch_normalization(b, h, training);
  Value skip = x;
  if (stride != 1 || x.shape().dim(3) != filters) {
    skip = layers::conv2d(b, x, filters, 1, stride, Padding::kSame, Activation::kNone, seed + 2);
  }
  return b.unary(Op::kRelu, h + skip);
}

Value resnet_small(GraphBuilder& b, Value images, bool training, uint64_t seed) {
  Value h = layers::conv2d(b, images, 16, 3, 1, Padding::kSame, Activation::kNone, seed);
  h = b.unary(Op::kRelu, layers::batch_normalization(b, h, training));
  h = residual_block(b, h, 16, 1, training, seed + 10);
  h = residual_block(b, h, 16, 1, training, seed + 20);
  h = residual_block(b, h, 32, 2, training, seed + 30);
  h = layers::reduce_mean(h, {1, 2});  // global average pool
  return layers::dense(b, h, 10, Activation::kNone, seed + 40);
}

// ResNet-50 v1.5 as TensorFlow's TPU reference (models/official/resnet, resnet_model.py) builds
// it: convolutions without bias, strided ones with fixed padding (conv2d_fixed_padding), batch
// norm with decay 0.9 and epsilon 1e-5, the stride of a downsampling bottleneck on its 3x3.
constexpr float kResNetBatchNormDecay = 0.9f, kResNetBatchNormEpsilon = 1e-5f;

Value resnet_conv(GraphBuilder& b, Value x, int64_t filters, int64_t kernel, int64_t stride,
                  uint64_t seed) {
  return layers::conv2d(b, x, filters, kernel, stride,
                        stride > 1 ? Padding::kFixed : Padding::kSame, Activation::kNone, seed,
                        /*use_bias=*/false);
}

Value resnet_batch_norm(GraphBuilder& b, Value x, bool training, bool relu) {
  x = layers::batch_normalization(b, x, training, kResNetBatchNormDecay, kResNetBatchNormEpsilon);
  return relu ? b.unary(Op::kRelu, x) : x;
}

// v1.5's bottleneck: 1x1 to `filters`, 3x3 at `stride`, 1x1 to 4 x filters, each with batch
// norm (ReLU after the first two); the shortcut a strided 1x1 projection with batch norm on a
// group's first block; ReLU after the sum.
Value bottleneck_block(GraphBuilder& b, Value x, int64_t filters, int64_t stride, bool project,
                       bool training, uint64_t seed) {
  Value shortcut = x;
  if (project)
    shortcut =
        resnet_batch_norm(b, resnet_conv(b, x, 4 * filters, 1, stride, seed), training, false);
  Value h = resnet_batch_norm(b, resnet_conv(b, x, filters, 1, 1, seed + 1), training, true);
  h = resnet_batch_norm(b, resnet_conv(b, h, filters, 3, stride, seed + 2), training, true);
  h = resnet_batch_norm(b, resnet_conv(b, h, 4 * filters, 1, 1, seed + 3), training, false);
  return b.unary(Op::kRelu, h + shortcut);
}

Value resnet50(GraphBuilder& b, Value images, bool training, uint64_t seed) {
  Value h = resnet_batch_norm(b, resnet_conv(b, images, 64, 7, 2, seed), training, true);
  h = layers::max_pooling2d(b, h, 3, 2, Padding::kSame);
  const int64_t blocks[] = {3, 4, 6, 3};
  for (int64_t group = 0; group < 4; ++group) {
    const int64_t filters = int64_t{64} << group;
    for (int64_t i = 0; i < blocks[group]; ++i) {
      const uint64_t block_seed = seed + 100 * static_cast<uint64_t>(group + 1) + 4 * i;
      h = bottleneck_block(b, h, filters, i == 0 && group > 0 ? 2 : 1, i == 0, training,
                           block_seed);
    }
  }
  h = layers::reduce_mean(h, {1, 2});  // global average pool
  return layers::dense(b, h, kImageNetClasses, Activation::kNone, seed + 1000);
}

// VGG-style, for large images: a patchify stem (conv 4x4 stride 4, as ConvNeXt's) so that no
// activation or im2col row of a 224x224 image outgrows a VMEM tile, then 3x3 convolutions at
// 1/8 and 1/16 of the side. About 15 GMAC per 224x224 image forward.
Value image_cnn(GraphBuilder& b, Value images, uint64_t seed) {
  Value h = layers::conv2d(b, images, 64, 4, 4, Padding::kSame, Activation::kRelu, seed);
  h = layers::max_pooling2d(b, h, 2, 2);
  h = layers::conv2d(b, h, 128, 3, 1, Padding::kSame, Activation::kRelu, seed + 1);
  h = layers::conv2d(b, h, 128, 3, 1, Padding::kSame, Activation::kRelu, seed + 2);
  h = layers::max_pooling2d(b, h, 2, 2);
  for (uint64_t i = 0; i < 3; ++i)
    h = layers::conv2d(b, h, 256, 3, 1, Padding::kSame, Activation::kRelu, seed + 3 + i);
  h = layers::reduce_mean(h, {1, 2});  // global average pool
  return layers::dense(b, h, 10, Activation::kNone, seed + 6);
}

Value transformer(GraphBuilder& b, Value images, uint64_t seed) {
  const int64_t n = images.shape().dim(0), tokens = 28, width = 28, d = 64, heads = 4,
                dh = d / heads;
  Value x = layers::dense(b, b.reshape(images, {n, tokens, width}), d, Activation::kNone,
                          seed);  // [n, 28, 64]
  // Multi-head self-attention: [n, 28, 64] -> heads [n * 4, 28, 16].
  auto split_heads = [&](Value v) {
    return b.reshape(b.transpose(b.reshape(v, {n, tokens, heads, dh}), {0, 2, 1, 3}),
                     {n * heads, tokens, dh});
  };
  const Value q = split_heads(layers::dense(b, x, d, Activation::kNone, seed + 1));
  const Value k = split_heads(layers::dense(b, x, d, Activation::kNone, seed + 2));
  const Value v = split_heads(layers::dense(b, x, d, Activation::kNone, seed + 3));
  const Value scores = b.matmul(q, b.transpose(k, {0, 2, 1})) * (1.0f / 4.0f);  // 1 / sqrt(16)
  const Value attended = b.matmul(layers::softmax(scores), v);                  // [n * 4, 28, 16]
  const Value merged = b.reshape(
      b.transpose(b.reshape(attended, {n, heads, tokens, dh}), {0, 2, 1, 3}), {n, tokens, d});
  // Layer norms without gamma and beta (scale_and_center off): the model as it was first built.
  x = layers::layer_normalization(b, x + layers::dense(b, merged, d, Activation::kNone, seed + 4),
                                  1e-6f, false);
  const Value ff = layers::dense(b, layers::dense(b, x, 128, Activation::kRelu, seed + 5), d,
                                 Activation::kNone, seed + 6);
  x = layers::layer_normalization(b, x + ff, 1e-6f, false);
  return layers::dense(b, layers::reduce_mean(x, {1}), 10, Activation::kNone, seed + 7);
}

// A BERT's entry: token inputs, 128 tokens by default; no images or classes.
ModelInfo bert_info(const char* name, const char* description) {
  ModelInfo m{name, description, 0, 0, 0};
  m.input = ModelInfo::Input::kTokens;
  m.seq_length = 128;
  return m;
}

// build_training_step's loss for a BERT: its pretraining graph on its infeeds.
absl::StatusOr<Value> bert_training_loss(GraphBuilder& b, const std::string& name, int64_t batch,
                                         int64_t seq_length, uint64_t seed, DTypePolicy policy) {
  auto config = bert_config(name);
  if (!config.ok()) return config.status();
  const BertFeatures features = bert_infeeds(b, batch, seq_length > 0 ? seq_length : 128);
  auto outputs = build_bert_pretraining(b, *config, features, /*training=*/true, seed, policy);
  if (!outputs.ok()) return outputs.status();
  return outputs->loss;
}

// build_training_step's loss for an image model: the mean cross-entropy of its logits.
absl::StatusOr<Value> image_training_loss(GraphBuilder& b, const ModelInfo& info, int64_t batch,
                                          int64_t image_side, uint64_t seed, DTypePolicy policy) {
  const int64_t side = image_side > 0 ? image_side : info.image_side;
  const Value images = b.infeed("image", DType::kF32, {batch, side, side, info.image_channels});
  const Value labels = b.infeed("label", DType::kS32, {batch});
  auto logits = build_model(b, info.name, images, /*training=*/true, seed, policy);
  if (!logits.ok()) return logits.status();
  return layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, *logits), {0});
}

}  // namespace

const std::vector<ModelInfo>& model_infos() {
  static const std::vector<ModelInfo> kModels = {
      {"mlp", "784 -> 256 relu -> 128 relu -> 10"},
      {"mnist_cnn",
       "conv 5x5x32, pool, conv 5x5x64, pool, dense 128, dropout 0.4, dense 10 (the TPUEstimator "
       "seed)"},
      {"resnet_small",
       "conv 3x3x16, 3 residual blocks with batch norm, global average pool, dense 10"},
      {"image_cnn",
       "large images (the infeed study's 224x224): conv 4x4/4 x64, pool, 2 conv 3x3x128, pool, "
       "3 conv 3x3x256, global average pool, dense 10"},
      {"transformer",
       "28 row tokens, one encoder layer (4 heads, d 64, ff 128), mean pool, dense 10"},
      {"resnet50",
       "ResNet-50 v1.5 (TensorFlow's TPU reference): conv 7x7/2 x64, max-pool 3x3/2, bottleneck "
       "stages [3, 4, 6, 3], global average pool, dense 1000; 224x224x3 images",
       224, 3, kImageNetClasses},
      bert_info("bert_large",
                "BERT-Large pretraining (google-research/bert): 24 layers, hidden 1024, 16 heads, "
                "intermediate 4096, vocabulary 30522; masked-LM and next-sentence heads"),
      bert_info("bert_base",
                "BERT-Base pretraining: 12 layers, hidden 768, 12 heads, intermediate 3072"),
      bert_info("bert_tiny",
                "BERT-Tiny pretraining (Google's smallest published BERT): 2 layers, hidden 128, "
                "2 heads, intermediate 512"),
  };
  return kModels;
}

absl::StatusOr<ModelInfo> model_info(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& m : model_infos()) {
    if (m.name == name) return m;
    names.push_back(m.name);
  }
  return absl::NotFoundError(
      str_cat("no model named '", name, "' (models: ", str_join(names, ", "), ")"));
}

const char* dtype_policy_name(DTypePolicy policy) { return kDTypePolicies.name(policy).data(); }

absl::StatusOr<DTypePolicy> parse_dtype_policy(const std::string& name) {
  if (auto policy = kDTypePolicies.parse(name)) return *policy;
  return absl::InvalidArgumentError(
      str_cat("unknown dtype policy '", name, "' (", kDTypePolicies.list(), ")"));
}

absl::StatusOr<Value> build_model(GraphBuilder& b, const std::string& name, Value images,
                                  bool training, uint64_t seed, DTypePolicy policy) {
  if (is_bert(name)) {
    return absl::InvalidArgumentError(
        str_cat(name,
                " reads token ids (BERT's pretraining features), not images: build it with "
                "build_bert_pretraining (runtime/models/bert.h)"));
  }
  const bool mixed = policy == DTypePolicy::kMixedBFloat16;
  std::optional<GraphBuilder::BFloat16Scope> bf16_scope;
  if (mixed) {
    bf16_scope.emplace(b);
    images = b.cast(images, DType::kBF16);
  }
  Value logits;
  if (name == "mlp")
    logits = mlp(b, images, seed);
  else if (name == "mnist_cnn")
    logits = mnist_cnn(b, images, training, seed);
  else if (name == "resnet_small")
    logits = resnet_small(b, images, training, seed);
  else if (name == "image_cnn")
    logits = image_cnn(b, images, seed);
  else if (name == "resnet50")
    logits = resnet50(b, images, training, seed);
  else if (name == "transformer") {
    const Shape& s = images.shape();
    if (s.rank() != 4 || s.dim(1) != 28 || s.dim(2) != 28 || s.dim(3) != 1) {
      return absl::InvalidArgumentError(str_cat(
          "the transformer takes 28x28x1 images (its 28 rows are its tokens); got ", s.str()));
    }
    logits = transformer(b, images, seed);
  } else {
    return model_info(name).status();
  }
  if (mixed) logits = b.cast(logits, DType::kF32);
  if (!b.status().ok()) return b.status();
  return logits;
}

absl::Status build_training_step(GraphBuilder& b, const std::string& name, int64_t batch,
                                 float learning_rate, uint64_t seed, DTypePolicy policy,
                                 uint32_t replicas, int64_t image_side, int64_t seq_length) {
  auto info = model_info(name);
  if (!info.ok()) return info.status();
  auto loss_or = info->input == ModelInfo::Input::kTokens
                     ? bert_training_loss(b, name, batch, seq_length, seed, policy)
                     : image_training_loss(b, *info, batch, image_side, seed, policy);
  if (!loss_or.ok()) return loss_or.status();
  return add_sgd_step(b, *loss_or, learning_rate, replicas);
}

absl::Status add_sgd_step(GraphBuilder& b, Value loss, float learning_rate, uint32_t replicas) {
  if (!b.status().ok()) return b.status();
  std::vector<Value> vars;
  for (int id : b.graph().variables()) {
    const std::string& var = b.graph().node(id).attrs.name;
    if (!is_statistic(var)) vars.push_back(Value{id, &b});  // batch-norm statistics are not trained
  }
  auto grads = replicas > 1 ? cross_shard_gradients(b, loss, vars, replicas, ShardReduction::kMean)
                            : gradients(b, loss, vars);
  if (!grads.ok()) return grads.status();
  for (size_t i = 0; i < vars.size(); ++i) b.update(vars[i], vars[i] - (*grads)[i] * learning_rate);
  b.output("loss", loss);
  return b.status();
}

}  // namespace tpusim::runtime::models
