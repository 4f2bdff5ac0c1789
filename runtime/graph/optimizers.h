#pragma once
// Optimizers as graph updates, with TensorFlow 1's semantics (tf.compat.v1.train): the step's
// learning rate comes from a schedule of the global step, slot variables hold each optimizer's
// state, and apply_gradients adds the updates of one step (variables, slots, global step) to
// the graph. With CrossShardOptimizer (cross_shard.h) the gradients are already summed over the
// replicas, so every replica applies the same update.
//
//   SGD       v -= lr * g
//   Momentum  a = momentum * a + g;  v -= lr * a              (nesterov: v -= lr * (g + momentum *
//   a)) Adam      t = step + 1;  lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)
//             m = b1 m + (1 - b1) g;  s = b2 s + (1 - b2) g^2;  v -= lr_t * m / (sqrt(s) + eps)
//   LAMB      (You et al. 2019, as BERT's MLPerf reference and tfa.optimizers.LAMB apply it)
//             t = step + 1;  m, s as Adam;  u = (m / (1 - b1^t)) / (sqrt(s / (1 - b2^t)) + eps)
//             + weight_decay * v (not for names holding one of exclude_from_weight_decay);
//             r = ||v|| / ||u|| when both norms are > 0, else 1;  v -= lr * r * u
//
// clip_global_norm > 0 first scales every gradient by clip / max(clip, global norm), the global
// norm sqrt(sum of every gradient's squares): tf.clip_by_global_norm, as BERT's optimizers do.
//
// Schedules (of the global step before this step's increment):
//   exponential decay   lr * rate ^ (step / decay_steps)   (staircase: floor(step / decay_steps))
//   piecewise constant  values[0] while step <= boundaries[0], values[i] while step <=
//                       boundaries[i], values.back() after the last boundary

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "common/named_values.h"
#include "runtime/graph/builder.h"

namespace tpusim::runtime {

struct LearningRate {
  enum class Kind { kConstant, kExponentialDecay, kPiecewiseConstant };
  Kind kind = Kind::kConstant;
  float initial = 0.01f;
  float decay_rate = 1.0f;
  int64_t decay_steps = 1;
  bool staircase = false;
  std::vector<int64_t> boundaries;
  std::vector<float> values;  // one more than boundaries
};

struct OptimizerSpec {
  enum class Kind { kSgd, kMomentum, kAdam, kLamb };
  Kind kind = Kind::kSgd;
  LearningRate learning_rate;
  float momentum = 0.9f;
  bool nesterov = false;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;  // LAMB's epsilon is BERT's 1e-6
  float weight_decay = 0.01f;                           // LAMB
  // LAMB: substrings of the variable names left out of weight decay (BERT's layer norms and
  // biases; "layer_norm" matches the graph's "layer_normalization_N").
  std::vector<std::string> exclude_from_weight_decay = {"LayerNorm", "layer_norm", "bias"};
  float clip_global_norm = 0;  // > 0: tf.clip_by_global_norm before the update
};

// The spec of `kind` with its TensorFlow defaults (LAMB: epsilon 1e-6).
OptimizerSpec optimizer_defaults(OptimizerSpec::Kind kind);

inline constexpr NamedValues<OptimizerSpec::Kind, 4> kOptimizers{
    {{{OptimizerSpec::Kind::kSgd, "sgd"},
      {OptimizerSpec::Kind::kMomentum, "momentum"},
      {OptimizerSpec::Kind::kAdam, "adam"},
      {OptimizerSpec::Kind::kLamb, "lamb"}}}};

// "sgd", "momentum", "adam", "lamb" -> kind; InvalidArgument lists the names.
absl::StatusOr<OptimizerSpec::Kind> optimizer_kind(const std::string& name);
const char* optimizer_name(OptimizerSpec::Kind kind);

// The f32 scalar variable "global_step" (0 at first), created on the first call.
Value global_step(GraphBuilder& b);

// The learning rate of the step whose global step is `step`; errors name the bad field.
absl::StatusOr<Value> learning_rate(GraphBuilder& b, const LearningRate& schedule, Value step);

// Adds the optimizer's slots and one step's updates of `vars` by `grads`, and the global step's
// increment; returns the step's learning rate (a scalar, for summaries).
absl::StatusOr<Value> apply_gradients(GraphBuilder& b, const OptimizerSpec& spec,
                                      const std::vector<Value>& vars,
                                      const std::vector<Value>& grads);

}  // namespace tpusim::runtime
