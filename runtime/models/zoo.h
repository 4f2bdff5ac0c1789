#pragma once
// The model zoo: small, real models as forward graphs over a batch of 28 x 28 x 1 images (the
// Fashion-MNIST shape; every model but the transformer takes other sizes too) with 10 classes,
// for the estimator, `tpusim compile` and benchmarks.
//
//   mlp          784 -> 256 relu -> 128 relu -> 10
//   mnist_cnn    the TPUEstimator MNIST seed: conv 5x5x32 relu, max-pool 2, conv 5x5x64 relu,
//                max-pool 2, dense 128 relu, dropout 0.4, dense 10
//   resnet_small conv 3x3x16, two residual blocks (conv-BN-relu-conv-BN + skip), a stride-2
//                block with a 1x1 projection, global average pool, dense 10
//   image_cnn    for large images (the infeed study's 224 x 224): conv 4x4 stride 4 x64,
//                max-pool 2, two conv 3x3x128, max-pool 2, three conv 3x3x256, global average
//                pool, dense 10
//   transformer  the image's 28 rows as 28 tokens: project to 64, one encoder layer (4-head
//                self-attention and a 128-wide feed-forward, each with residual and layer
//                norm), mean over tokens, dense 10
//   resnet50     ResNet-50 v1.5 as TensorFlow's TPU reference model: 1000 classes, 224x224x3
//   bert_large, bert_base, bert_tiny
//                BERT pretraining (bert.h): token ids, not images, in; the masked-LM and
//                next-sentence losses out

#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/builder.h"
#include "runtime/graph/dtype_policy.h"

namespace tpusim::runtime::models {

struct ModelInfo {
  std::string name;
  std::string description;
  // The images the model is published for (what --input synthetic makes): side x side x channels
  // (Fashion-MNIST's 28x28x1 for the small models), and the classes of its logits.
  int64_t image_side = 28;
  int64_t image_channels = 1;
  int64_t classes = 10;
  // What the model reads: images (and labels), or BERT's pretraining features (bert.h) of
  // `seq_length` tokens by default.
  enum class Input { kImages, kTokens };
  Input input = Input::kImages;
  int64_t seq_length = 0;
};
// The model named `name`; NotFound lists the models.
absl::StatusOr<ModelInfo> model_info(const std::string& name);
const std::vector<ModelInfo>& model_infos();

// Keras's dtype policies (runtime/graph/dtype_policy.h).
using runtime::DTypePolicy;
const char* dtype_policy_name(DTypePolicy policy);
// "float32" or "mixed_bfloat16"; InvalidArgument names the accepted ones.
absl::StatusOr<DTypePolicy> parse_dtype_policy(const std::string& name);

// Logits [batch, classes] (f32) of `name` for f32 images [batch, H, W, C] (28x28x1 for the
// transformer); NotFound lists the models, InvalidArgument names a model that takes tokens.
absl::StatusOr<Value> build_model(GraphBuilder& b, const std::string& name, Value images,
                                  bool training, uint64_t seed,
                                  DTypePolicy policy = DTypePolicy::kFloat32);

// One training step of `name` at `batch`: an image model infeeds "image" f32 [batch, side, side,
// channels] (the model's published images; `image_side` > 0 another side) and "label" s32
// [batch], its loss the mean cross-entropy; a BERT infeeds its pretraining features
// (bert_infeeds) at `seq_length` tokens (0: the model's default), its loss the masked-LM plus
// next-sentence loss. Gradients of every trained variable (with `replicas` > 1,
// CrossShardOptimizer's: the mean over the replicas, by cross_replica_sum); plain SGD updates at
// `learning_rate`; outputs "loss". (The estimator brings optimizers with state.)
// The training step around a scalar `loss` built on `b`: gradients of every trained variable
// (not batch-norm statistics; with `replicas` > 1 CrossShardOptimizer's mean over them), plain
// SGD updates at `learning_rate`, and the output "loss". build_training_step's, for a model
// from elsewhere (an imported one).
absl::Status add_sgd_step(GraphBuilder& b, Value loss, float learning_rate, uint32_t replicas = 1);

absl::Status build_training_step(GraphBuilder& b, const std::string& name, int64_t batch,
                                 float learning_rate, uint64_t seed,
                                 DTypePolicy policy = DTypePolicy::kFloat32, uint32_t replicas = 1,
                                 int64_t image_side = 0, int64_t seq_length = 0);

}  // namespace tpusim::runtime::models
