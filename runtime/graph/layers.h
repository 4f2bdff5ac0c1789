#pragma once
// Composite operations and tf.layers-style builders, made of graph primitives so that every
// backend and the autodiff get them for free. Layers create their variables under a unique
// scope ("dense_1/kernel", "dense_1/bias"), seeded from `seed` so initial weights are the same
// everywhere.

#include <functional>
#include <string>

#include "runtime/graph/builder.h"

namespace tpusim::runtime::layers {

enum class Activation { kNone, kRelu, kTanh, kSigmoid };
// kFixed: TensorFlow ResNet's `fixed_padding`, (k - 1) / 2 zeros before and the rest of k - 1
// after each side whatever the image size (SAME pads the odd zero after, and only as much as the
// stride needs), as an explicit window padding: XLA pads inside the convolution.
enum class Padding { kValid, kSame, kFixed };

Value activate(Value x, Activation activation);
// f(x) computed in f32 for a bf16 x (cast in, result cast back to bf16); f(x) otherwise. What
// mixed precision does for numerically sensitive layers: softmax, batch and layer norm.
Value in_f32(Value x, const std::function<Value(Value)>& f);
Value reduce_mean(Value x, std::vector<int64_t> axes);
Value softmax(Value logits);      // over the last axis; in f32 for bf16 logits (in_f32)
Value log_softmax(Value logits);  // over the last axis
// Per-example loss -log softmax(logits)[label]: labels s32 [N], logits f32 [N, classes].
Value sparse_softmax_cross_entropy(Value labels, Value logits);

// [batch, d1, d2, ...] -> [batch, d1 * d2 * ...], as Keras' Flatten.
Value flatten(GraphBuilder& b, Value x);
Value dense(GraphBuilder& b, Value x, int64_t units, Activation activation = Activation::kNone,
            uint64_t seed = 0, bool use_bias = true);
// NHWC input, [kh, kw, in, filters] kernel; lowered as im2col patches times the kernel.
Value conv2d(GraphBuilder& b, Value x, int64_t filters, int64_t kernel, int64_t stride = 1,
             Padding padding = Padding::kSame, Activation activation = Activation::kNone,
             uint64_t seed = 0, bool use_bias = true);
Value max_pooling2d(GraphBuilder& b, Value x, int64_t pool, int64_t stride,
                    Padding padding = Padding::kValid);
Value average_pooling2d(GraphBuilder& b, Value x, int64_t pool, int64_t stride,
                        Padding padding = Padding::kValid);
// Inverted dropout: keeps each element with probability 1 - rate and scales it by 1 / (1 - rate);
// the mask comes from the counter-based RNG (seed, step, element), so runs reproduce.
Value dropout(GraphBuilder& b, Value x, float rate, bool training, uint64_t seed);
// Batch normalisation over every axis but the last. Training normalises with the batch's
// statistics and updates the moving averages (momentum); inference uses the moving averages.
// A bf16 x is normalised in f32 with f32 variables, as TF's fused batch norm does.
Value batch_normalization(GraphBuilder& b, Value x, bool training, float momentum = 0.99f,
                          float epsilon = 1e-3f);

}  // namespace tpusim::runtime::layers
