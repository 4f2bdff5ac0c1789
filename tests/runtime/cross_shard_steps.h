#pragma once
// CrossShardOptimizer training steps for the tests of replicated runs: three dense layers with
// six gradients, each all-reduced, and SGD updates that read the sums; and the zoo's mlp.

#include <vector>

#include <gtest/gtest.h>

#include "runtime/graph/cross_shard.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"

namespace tpusim::runtime::testing {

inline Graph three_layer_step(uint32_t replicas = 8) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32, 256});
  const Value target = b.infeed("target", DType::kF32, {32, 128});
  Value h = layers::dense(b, x, 512, layers::Activation::kRelu, 1);
  h = layers::dense(b, h, 256, layers::Activation::kRelu, 2);
  const Value err = layers::dense(b, h, 128, layers::Activation::kNone, 3) - target;
  const Value loss = layers::reduce_mean(err * err, {0, 1});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = cross_shard_gradients(b, loss, vars, replicas, ShardReduction::kMean);
  EXPECT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < vars.size(); ++i) b.update(vars[i], vars[i] - (*grads)[i] * 0.01f);
  b.output("loss", loss);
  EXPECT_TRUE(b.status().ok()) << b.status();
  return b.graph();
}

// The zoo's mlp (six gradients, 0.9 MiB) on `rows` examples a replica, SGD at `learning_rate`,
// its gradients summed over `replicas`.
inline Graph mlp_step(uint32_t replicas, int64_t rows, float learning_rate) {
  GraphBuilder b;
  EXPECT_TRUE(models::build_training_step(b, "mlp", rows, learning_rate, 1,
                                          models::DTypePolicy::kFloat32, replicas)
                  .ok());
  return b.graph();
}

}  // namespace tpusim::runtime::testing
