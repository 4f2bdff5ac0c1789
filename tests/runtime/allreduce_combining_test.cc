// Combined all-reduces on the tpusim backend (CompileOptions::allreduce_combine_bytes): mlp with
// CrossShardOptimizer on the 8 cores of a v3-8, its six gradients each all-reduced alone or all
// in one. One System per process (one test per process).
#include <cmath>

#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "sim/numerics/random.h"
#include "tests/runtime/cross_shard_steps.h"

namespace tpusim::runtime {
namespace allreduce_combining_test {

constexpr uint32_t kReplicas = 8;  // the cores of a v3-8
constexpr int64_t kRows = 32;

// mlp with CrossShardOptimizer over the 8 replicas.
Graph training_step() { return testing::mlp_step(kReplicas, kRows, 0.05f); }

// `steps` steps of `replicas` batches, each replica's images its own.
std::vector<LoopStep> steps_for(uint32_t replicas, int steps) {
  std::vector<LoopStep> loop(static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    for (uint32_t r = 0; r < replicas; ++r) {
      HostTensor image = HostTensor::zeros(DType::kF32, Shape{kRows, 28, 28, 1});
      for (size_t i = 0; i < image.f.size(); ++i)
        image.f[i] = sim::counter_uniform(static_cast<uint64_t>(s), r, i);
      HostTensor label = HostTensor::zeros(DType::kS32, Shape{kRows});
      for (int64_t i = 0; i < kRows; ++i) label.i[static_cast<size_t>(i)] = (i + r) % 10;
      loop[static_cast<size_t>(s)].replicas.push_back({{"image", image}, {"label", label}});
    }
  }
  return loop;
}

CompileOptions combining(uint64_t bytes, uint32_t simulated = 0) {
  CompileOptions o;
  o.replicas = kReplicas;
  o.allreduce_combine_bytes = bytes;
  o.simulated_replicas = simulated;
  return o;
}

// Combined, the gradients are summed as one buffer cut into the ring's 8 segments at other
// places than each tensor's own, so an element may be summed starting from another replica:
// the weights agree to f32 rounding. The step pays one all-reduce's latency instead of six:
// 3 steps take 279181 cycles instead of 404428.
// Folded onto one chip, the combined step takes the cycles it takes unfolded.
TEST(AllReduceCombining, OneAllReduceSumsWhatSixDoInLessTime) {
  auto tpu = make_backend("tpusim");
  ASSERT_TRUE(tpu.ok()) << tpu.status();
  const Graph g = training_step();
  auto apart = (*tpu)->compile(g, combining(0));
  auto combined = (*tpu)->compile(g, combining(64 << 20));
  ASSERT_TRUE(apart.ok()) << apart.status();
  ASSERT_TRUE(combined.ok()) << combined.status();
  Variables v_apart = initial_variables(g), v_combined = v_apart;
  auto apart_run = (*tpu)->run_loop(**apart, v_apart, steps_for(kReplicas, 3), 0);
  auto combined_run = (*tpu)->run_loop(**combined, v_combined, steps_for(kReplicas, 3), 0);
  ASSERT_TRUE(apart_run.ok()) << apart_run.status();
  ASSERT_TRUE(combined_run.ok()) << combined_run.status();
  int compared = 0;
  for (const auto& [name, value] : v_apart) {
    const std::vector<float>& other = v_combined.at(name).f;
    ASSERT_EQ(other.size(), value.f.size()) << name;
    for (size_t i = 0; i < value.f.size(); ++i) {
      EXPECT_NEAR(other[i], value.f[i], 1e-6 + 1e-5 * std::abs(value.f[i])) << name << " " << i;
      ++compared;
    }
  }
  EXPECT_GT(compared, 100000);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_NEAR(combined_run->outputs[s][0].at("loss").f[0],
                apart_run->outputs[s][0].at("loss").f[0], 1e-5)
        << "step " << s;
  }
  EXPECT_LT(combined_run->timing.cycles, apart_run->timing.cycles);
  EXPECT_EQ(apart_run->timing.cycles, 371251u);
  EXPECT_EQ(combined_run->timing.cycles, 228133u);

  ASSERT_TRUE((*tpu)->set_timing_only(true).ok());
  auto folded = (*tpu)->compile(g, combining(64 << 20, 2));
  ASSERT_TRUE(folded.ok()) << folded.status();
  Variables v = initial_variables(g);
  auto folded_run = (*tpu)->run_loop(**folded, v, steps_for(2, 3), 0);
  ASSERT_TRUE(folded_run.ok()) << folded_run.status();
  EXPECT_EQ(folded_run->timing.cycles, combined_run->timing.cycles);
}

}  // namespace allreduce_combining_test
}  // namespace tpusim::runtime
