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
// The same with the kernel drawn from `kernel_init` (Keras' kernel_initializer; the one above is
// Glorot uniform from `seed`), the bias zeros.
Value dense(GraphBuilder& b, Value x, int64_t units, Activation activation,
            const Initializer& kernel_init, bool use_bias = true);
// NHWC input, [kh, kw, in, filters] kernel; lowered as im2col patches times the kernel.
Value conv2d(GraphBuilder& b, Value x, int64_t filters, int64_t kernel, int64_t stride = 1,
             Padding padding = Padding::kSame, Activation activation = Activation::kNone,
             uint64_t seed = 0, bool use_bias = true);
// The convolution of NHWC `x` with a [kh, kw, in, out] `kernel` over `window` (conv2d's, for a
// kernel from elsewhere: an imported model's).
Value convolve(GraphBuilder& b, Value x, Value kernel, const Window& window);
Value max_pooling2d(GraphBuilder& b, Value x, int64_t pool, int64_t stride,
                    Padding padding = Padding::kValid);
// The maximum over each window of NHWC `x`; padded positions never win.
Value max_pool(GraphBuilder& b, Value x, const Window& window);
// The mean over each window of NHWC `x`: of the window's elements inside the image, or with
// `count_padding` of all of them (ONNX's count_include_pad).
Value average_pool(GraphBuilder& b, Value x, const Window& window, bool count_padding);
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
// The same with given variables [last dim] (an imported model's).
struct BatchNormVariables {
  Value gamma, beta, moving_mean, moving_variance;
};
Value batch_normalize(GraphBuilder& b, Value x, const BatchNormVariables& variables, bool training,
                      float momentum, float epsilon);

// BERT's layers (google-research/bert, modeling.py), in layers_bert.cc.
//
// GELU, exact: x * 0.5 * (1 + erf(x / sqrt(2))), as BERT's gelu (not the tanh approximation).
Value gelu(Value x);
// An embedding table, the variable `name` [vocab, dim] (truncated normal, stddev 0.02: BERT's
// initializer_range), and the rows `ids` (s32 [...]) name: [..., dim]. Out-of-range ids clamp
// (graph.h, kGather). The table is f32, read as bf16 inside a BFloat16Scope.
Value embedding(GraphBuilder& b, Value ids, int64_t vocab, int64_t dim, uint64_t seed,
                const std::string& name);
// Layer normalisation over the last axis: (x - mean) * rsqrt(variance + epsilon), then
// * gamma + beta with the variables `layer_normalization_N/gamma` (ones) and `/beta` (zeros)
// [last dim] under that scope, as BERT's LayerNorm (tf.contrib.layers.layer_norm, epsilon 1e-12).
// With `scale_and_center` false: no variables and no scope, the normalisation alone (the zoo
// transformer's). A bf16 x is normalised in f32 (in_f32).
Value layer_normalization(GraphBuilder& b, Value x, float epsilon = 1e-12f,
                          bool scale_and_center = true);
// The same with given `gamma` and `beta` [last dim] (either invalid: none), an imported model's.
Value layer_normalize(GraphBuilder& b, Value x, Value gamma, Value beta, float epsilon);

}  // namespace tpusim::runtime::layers
