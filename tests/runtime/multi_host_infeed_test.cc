// Per-host infeed on the tpusim backend: v3-32's 4 hosts each take their own part of a step
// (HostSchedule::hosts), so a host that is late holds up its own chips' infeed and, through the
// all-reduce, everyone else's step, but not the other hosts' infeed. One System per process.
#include <algorithm>

#include <gtest/gtest.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/host_schedule.h"
#include "runtime/backend/tpusim/tpusim_backend.h"
#include "runtime/graph/initializers.h"
#include "tests/runtime/cross_shard_steps.h"

namespace tpusim::runtime {
namespace multi_host_infeed_test {

constexpr uint32_t kReplicas = 32;  // v3-32: 16 chips of 2 cores, 4 chips to a host
constexpr int64_t kRows = 32;

// Every host's part ready at once, but host 1's, which is ready `late` seconds after the start
// of each step's turn (the previous part taken); it records when each host took each part.
class OneLateHost final : public HostSchedule {
 public:
  explicit OneLateHost(double late) : late_(late) {}
  double ready_seconds(uint64_t step) override { return host_ready_seconds(step, 1); }
  void taken(uint64_t step, double seconds) override {
    for (uint32_t h = 0; h < 4; ++h) host_taken(step, h, seconds);
  }
  uint32_t hosts() const override { return 4; }
  double host_ready_seconds(uint64_t step, uint32_t host) override {
    if (host != 1) return 0;
    const double previous = step == 0 ? 0 : taken_[1].at(step - 1);
    return previous + late_;
  }
  void host_taken(uint64_t step, uint32_t host, double seconds) override {
    if (taken_[host].size() <= step) taken_[host].resize(step + 1, 0);
    taken_[host][step] = seconds;
  }
  const std::vector<double>& taken_by(uint32_t host) const { return taken_[host]; }

 private:
  double late_;
  std::vector<double> taken_[4];
};

TEST(MultiHostInfeed, ALateHostHoldsUpOnlyItsOwnChipsInfeed) {
  auto tpu = make_tpusim_backend("v3-32");
  ASSERT_TRUE(tpu->set_timing_only(true).ok());
  const Graph g = testing::mlp_step(kReplicas, kRows, 0.01f);
  CompileOptions options;
  options.replicas = kReplicas;
  auto exe = tpu->compile(g, options);
  ASSERT_TRUE(exe.ok()) << exe.status();
  const Feeds feeds = {{"image", HostTensor::zeros(DType::kF32, Shape{kRows, 28, 28, 1})},
                       {"label", HostTensor::zeros(DType::kS32, Shape{kRows})}};
  auto host = std::make_shared<OneLateHost>(1e-3);  // 1 ms behind, each step
  std::vector<LoopStep> loop(3);
  for (uint64_t s = 0; s < loop.size(); ++s) {
    loop[s].replicas.assign(kReplicas, feeds);
    loop[s].host = host;
    loop[s].host_step = s;
  }
  Variables vars = initial_variables(g);
  const double start = tpu->device_now_seconds();
  auto run = tpu->run_loop(**exe, vars, loop, 0);
  ASSERT_TRUE(run.ok()) << run.status();
  // Host 0 takes its parts as fast as its chips drain them, long before host 1 has its own.
  ASSERT_EQ(host->taken_by(0).size(), 3u);
  ASSERT_EQ(host->taken_by(1).size(), 3u);
  EXPECT_LT(host->taken_by(0)[0] - start, 1e-4);
  EXPECT_GE(host->taken_by(1)[0], 1e-3);
  EXPECT_LT(host->taken_by(0)[1], host->taken_by(1)[0]);
  // Host 1's replicas (cores 8..15) wait for their infeed; the others' first batches are there
  // at once, and they wait for host 1's replicas at the all-reduce instead.
  const std::vector<uint64_t>& wait = run->timing.infeed_wait_cycles;
  ASSERT_EQ(wait.size(), kReplicas);
  const uint64_t host1_least = *std::min_element(wait.begin() + 8, wait.begin() + 16);
  for (uint32_t r = 0; r < kReplicas; ++r) {
    if (r >= 8 && r < 16) continue;
    EXPECT_LT(wait[r] * 4, host1_least) << "replica " << r;
  }
  // Host 1's part alone paces the step: about 1 ms a step.
  EXPECT_GT(run->timing.seconds, 3e-3);
}

}  // namespace multi_host_infeed_test
}  // namespace tpusim::runtime
