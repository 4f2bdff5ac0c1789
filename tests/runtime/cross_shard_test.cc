// CrossShardOptimizer semantics on the cpu backend's replicas: MEAN gives the gradient of the
// global batch's mean loss, SUM num_shards times that; cross_replica_sum adds in ring order and
// every replica ends with the same variables.
#include "runtime/graph/cross_shard.h"

#include <optional>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime {
namespace cross_shard_test {

constexpr int64_t kPerReplica = 8;

// A small regression step at `batch` rows; updates with SGD at 0.1.
Graph regression_step(int64_t batch, uint32_t shards, std::optional<ShardReduction> reduction) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {batch, 6});
  const Value y = b.infeed("y", DType::kF32, {batch, 3});
  const Value err = layers::dense(b, x, 3, layers::Activation::kTanh, 1) - y;
  const Value loss = layers::reduce_mean(err * err, {0, 1});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = reduction ? cross_shard_gradients(b, loss, vars, shards, *reduction)
                         : gradients(b, loss, vars);
  EXPECT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < vars.size(); ++i) {
    b.output(str_cat("before/", b.graph().node(vars[i].id).attrs.name), vars[i]);
    b.update(vars[i], vars[i] - (*grads)[i] * 0.1f);
  }
  b.output("loss", loss);
  EXPECT_TRUE(b.status().ok()) << b.status();
  return b.graph();
}

HostTensor rows(const HostTensor& t, int64_t first, int64_t count) {
  std::vector<int64_t> dims = t.shape.dims();
  const int64_t width = t.elements() / dims[0];
  dims[0] = count;
  return HostTensor::from(Shape(dims), std::vector<float>(t.f.begin() + first * width,
                                                          t.f.begin() + (first + count) * width));
}

struct Global {
  HostTensor x, y;
};

Global global_batch(int64_t n, uint64_t seed) {
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {n, 6}}, {"y", DType::kF32, {n, 3}}};
  Feeds f = opcheck::make_feeds(c, seed);
  return {f.at("x"), f.at("y")};
}

// One step of `shards` replicas, replica r on rows [r*8, r*8+8) of the global batch.
LoopResult run_shards(const Graph& g, uint32_t shards, Variables& vars, const Global& data,
                      int steps = 1) {
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(g, {Precision::kFp32, shards});
  EXPECT_TRUE(exe.ok()) << exe.status();
  std::vector<LoopStep> loop(static_cast<size_t>(steps));
  for (LoopStep& step : loop) {
    for (uint32_t r = 0; r < shards; ++r) {
      step.replicas.push_back({{"x", rows(data.x, r * kPerReplica, kPerReplica)},
                               {"y", rows(data.y, r * kPerReplica, kPerReplica)}});
    }
  }
  auto out = (*backend)->run_loop(**exe, vars, loop, 0);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : LoopResult{};
}

// MEAN over 4 replicas of 8 rows is plain SGD on the 32-row global batch.
TEST(CrossShard, MeanIsTheGradientOfTheGlobalBatch) {
  const Global data = global_batch(4 * kPerReplica, 5);
  Variables sharded = initial_variables(regression_step(kPerReplica, 4, ShardReduction::kMean));
  Variables single = sharded;
  run_shards(regression_step(kPerReplica, 4, ShardReduction::kMean), 4, sharded, data);
  auto backend = make_backend("cpu");
  const Graph whole = regression_step(4 * kPerReplica, 1, std::nullopt);
  auto exe = (*backend)->compile(whole, {});
  ASSERT_TRUE(exe.ok());
  ASSERT_TRUE((*backend)->run(**exe, single, {{{"x", data.x}, {"y", data.y}}}, 0).ok());
  for (const auto& [name, value] : single) {
    for (size_t i = 0; i < value.f.size(); ++i)
      EXPECT_NEAR(sharded.at(name).f[i], value.f[i], 1e-6) << name << "[" << i << "]";
  }
}

// SUM skips the 1/num_shards scaling: its update is 4 times MEAN's.
TEST(CrossShard, SumScalesTheUpdateByTheNumberOfShards) {
  const Global data = global_batch(4 * kPerReplica, 6);
  const Variables init = initial_variables(regression_step(kPerReplica, 4, ShardReduction::kMean));
  Variables mean = init, sum = init;
  run_shards(regression_step(kPerReplica, 4, ShardReduction::kMean), 4, mean, data);
  run_shards(regression_step(kPerReplica, 4, ShardReduction::kSum), 4, sum, data);
  for (const auto& [name, value] : init) {
    for (size_t i = 0; i < value.f.size(); ++i) {
      const float d_mean = mean.at(name).f[i] - value.f[i];
      const float d_sum = sum.at(name).f[i] - value.f[i];
      EXPECT_NEAR(d_sum, 4 * d_mean, 1e-5f + 1e-4f * std::abs(d_sum)) << name;
    }
  }
}

// After a step every replica holds bitwise the same variables (their values come out at the
// start of the next step).
TEST(CrossShard, EveryReplicaKeepsTheSameVariables) {
  const Global data = global_batch(4 * kPerReplica, 7);
  const Graph g = regression_step(kPerReplica, 4, ShardReduction::kMean);
  Variables vars = initial_variables(g);
  const LoopResult r = run_shards(g, 4, vars, data, 3);
  for (const auto& [name, value] : r.outputs[2][0]) {
    if (name.rfind("before/", 0) != 0) continue;
    for (uint32_t k = 1; k < 4; ++k) EXPECT_EQ(r.outputs[2][k].at(name).f, value.f) << name;
  }
  EXPECT_NE(r.outputs[2][0].at("loss").f, r.outputs[2][1].at("loss").f);  // their own data
}

// The sum adds in the ring's order: segment s of 3 starts at replica s+1.
TEST(CrossShard, CrossReplicaSumAddsInRingOrder) {
  GraphBuilder b;
  b.output("s", b.cross_replica_sum(b.infeed("x", DType::kF32, {3})));
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {Precision::kFp32, 3});
  ASSERT_TRUE(exe.ok());
  const float big = 1e8f, one = 1.0f;
  LoopStep step;
  step.replicas = {{{"x", HostTensor::from({3}, {big, one, -big})}},
                   {{"x", HostTensor::from({3}, {one, -big, big})}},
                   {{"x", HostTensor::from({3}, {-big, big, one})}}};
  Variables none;
  auto out = (*backend)->run_loop(**exe, none, {step}, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  // Element 0 (segment 0): (x1 + x2) + x0 = (1 - 1e8) + 1e8 = 0 in f32; element 1: (x2 + x0) + x1
  // = (1e8 + 1) - 1e8 = 0; element 2: (x0 + x1) + x2 = (-1e8 + 1e8) + 1 = 1.
  for (uint32_t r = 0; r < 3; ++r)
    EXPECT_EQ(out->outputs[0][r].at("s").f, (std::vector<float>{0, 0, 1})) << "replica " << r;
}

}  // namespace cross_shard_test
}  // namespace tpusim::runtime
