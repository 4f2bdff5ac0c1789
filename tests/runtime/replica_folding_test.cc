// Replica folding on the tpusim backend (CompileOptions::simulated_replicas): a v3-8 training
// step of mlp with CrossShardOptimizer, its 8 replicas simulated, or 2 of them with the other 6
// folded into shadows that only join the all-reduces. One System per process (one test per
// process).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "tests/runtime/cross_shard_steps.h"

namespace tpusim::runtime {
namespace replica_folding_test {

using ::testing::HasSubstr;

constexpr uint32_t kReplicas = 8;  // the cores of a v3-8
constexpr int64_t kRows = 32;

// mlp with CrossShardOptimizer over the 8 replicas.
Graph training_step() { return testing::mlp_step(kReplicas, kRows, 0.01f); }

// `steps` steps, every batch ready at once, for `replicas` replicas.
std::vector<LoopStep> steps_for(uint32_t replicas, int steps) {
  Feeds feeds = {{"image", HostTensor::zeros(DType::kF32, Shape{kRows, 28, 28, 1})},
                 {"label", HostTensor::zeros(DType::kS32, Shape{kRows})}};
  std::vector<LoopStep> loop(static_cast<size_t>(steps));
  for (LoopStep& s : loop) s.replicas.assign(replicas, feeds);
  return loop;
}

CompileOptions folded_to(uint32_t simulated) {
  CompileOptions o;
  o.replicas = kReplicas;
  o.simulated_replicas = simulated;
  return o;
}

TEST(ReplicaFolding, TwoSimulatedReplicasTakeTheStepTimeOfEight) {
  auto tpu = make_backend("tpusim");
  ASSERT_TRUE(tpu.ok()) << tpu.status();
  ASSERT_TRUE((*tpu)->set_timing_only(true).ok());
  const Graph g = training_step();
  Variables vars = initial_variables(g);
  auto full = (*tpu)->compile(g, folded_to(0));
  auto folded = (*tpu)->compile(g, folded_to(2));
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ((*full)->simulated_replicas(), kReplicas);
  EXPECT_EQ((*folded)->replicas(), kReplicas);
  EXPECT_EQ((*folded)->simulated_replicas(), 2u);

  auto full_run = (*tpu)->run_loop(**full, vars, steps_for(kReplicas, 3), 0);
  ASSERT_TRUE(full_run.ok()) << full_run.status();
  auto folded_run = (*tpu)->run_loop(**folded, vars, steps_for(2, 3), 0);
  ASSERT_TRUE(folded_run.ok()) << folded_run.status();
  // Batches, outputs and per-core figures are the simulated replicas'.
  ASSERT_EQ(folded_run->outputs.size(), 3u);
  EXPECT_EQ(folded_run->outputs[0].size(), 2u);
  EXPECT_EQ(folded_run->timing.infeed_wait_cycles.size(), 2u);
  EXPECT_EQ(folded_run->timing.mxu_utilization.size(), 2u);
  // The six shadows join each gradient's all-reduce when chip 0's cores reach it, and their
  // chips' HBM is as busy as chip 0's: the loop takes the cycles it takes unfolded, and chip 0's
  // ops their time. (The ring's hops 3->4 and 7->0 cross two chips, so its members are not
  // quite symmetric; on the 2-layer regression of infeed_system_test that made the folded loop
  // 0.3% longer, here nothing but the time two of the all-reduces take, each within 2%: a shadow
  // chip's HBM takes chip 0's loads at chip 0's cycles, where its own cores' come a little
  // apart, and the collectives' requests meet them in another order; where an all-reduce is on
  // the step's critical path, that moves the loop by as much: 0.15% here. An op that runs while
  // an all-reduce's requests cross chip 0's HBM meets them in that other order too: one kernel
  // gradient here, 0.12% apart; every other op takes the same time to the cycle.)
  EXPECT_EQ(full_run->timing.cycles, 371251u);
  EXPECT_EQ(folded_run->timing.cycles, 370669u);
  ASSERT_EQ(folded_run->timing.ops.size(), full_run->timing.ops.size());
  int apart = 0;
  for (size_t i = 0; i < full_run->timing.ops.size(); ++i) {
    const OpTiming& folded_op = folded_run->timing.ops[i];
    const OpTiming& full_op = full_run->timing.ops[i];
    const double within = full_op.op == "cross_replica_sum" ? 0.02 : 0.005;
    EXPECT_NEAR(folded_op.seconds, full_op.seconds, within * full_op.seconds) << full_op.label;
    if (full_op.op != "cross_replica_sum" && folded_op.seconds != full_op.seconds) ++apart;
  }
  EXPECT_LE(apart, 1);

  // A loop needs a batch per simulated replica, and folded replicas compute no values.
  auto eight = (*tpu)->run_loop(**folded, vars, steps_for(kReplicas, 1), 0);
  ASSERT_FALSE(eight.ok());
  EXPECT_THAT(std::string(eight.status().message()), HasSubstr("step 0: 8 batches for 2 replicas"));
  ASSERT_TRUE((*tpu)->set_timing_only(false).ok());
  auto valued = (*tpu)->run_loop(**folded, vars, steps_for(2, 1), 0);
  ASSERT_FALSE(valued.ok());
  EXPECT_THAT(std::string(valued.status().message()),
              HasSubstr("tpusim backend: replica folding (2 of 8 replicas simulated) runs "
                        "timing-only: the folded replicas compute no values"));
}

TEST(ReplicaFolding, OnlyTheTpusimBackendFolds) {
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto exe = (*cpu)->compile(training_step(), folded_to(2));
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(std::string(exe.status().message()),
              HasSubstr("cpu backend: replica folding (2 of 8 replicas simulated) is not "
                        "supported (cpu: every replica computed)"));
  // Asked through the registry, the error names the backend that folds.
  EXPECT_THAT(std::string(check_registered_options("cpu", folded_to(2)).message()),
              HasSubstr("cpu backend: replica folding (2 of 8 replicas simulated) needs the "
                        "tpusim backend (cpu and gpu: every replica computed)"));
  auto tpu = make_backend("tpusim");
  auto part = (*tpu)->compile(training_step(), folded_to(3));
  ASSERT_FALSE(part.ok());
  EXPECT_THAT(std::string(part.status().message()),
              HasSubstr("tpusim backend: 3 simulated replicas of 8 do not fill whole chips of 2 "
                        "cores"));
  auto more = (*tpu)->compile(training_step(), folded_to(9));
  ASSERT_FALSE(more.ok());
  EXPECT_THAT(std::string(more.status().message()),
              HasSubstr("tpusim backend: 9 simulated replicas of 8"));
}

}  // namespace replica_folding_test
}  // namespace tpusim::runtime
