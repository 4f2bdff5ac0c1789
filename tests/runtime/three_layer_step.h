#pragma once
// A CrossShardOptimizer step of three dense layers over 8 replicas, for the tests of the tpusim
// compiler's all-reduces: six gradients, each all-reduced, and SGD updates that read the sums.

#include <vector>

#include <gtest/gtest.h>

#include "runtime/graph/cross_shard.h"
#include "runtime/graph/layers.h"

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

}  // namespace tpusim::runtime::testing
