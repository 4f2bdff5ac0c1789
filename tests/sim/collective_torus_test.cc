// The every-dimension torus all-reduce on a v4 cube (4 x 4 x 4 chips, 2 cores each): the same
// sum on every core, and the links' floor reached. One System per process.
#include <gtest/gtest.h>

#include "sim/net/collective_bound.h"
#include "sim/net/topology.h"
#include "tests/sim/collective_util.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace collective_torus_test {

using testing::make_system;
using testing::run_collective;
using testing::values_of;
using C = isa::Collective;

// 4099 elements in 1 KiB chunks: six parts of 683 or 684 elements through five phases, every
// member ending with bitwise the same sum. Then 64 MiB, timing only, in 64 KiB chunks: the torus
// keeps every link busy and comes within 1% of its busiest link's floor (the Z links:
// CollectiveBound.TheTorusSharesEveryDimension), 2.7 times as fast as torus2d, whose columns
// snake 16 chips over Y and Z one way round, and 1.5 times the bidirectional ring.
TEST(CollectiveTorus, OnAV4CubeEveryCoreGetsTheSumAndTheLinksAreTheBound) {
  auto s = make_system("v4-128");
  const Topology t(s->slice());
  ASSERT_EQ(t.cores(), 128u);
  const uint64_t n = 4099;
  const auto r = run_collective(*s, C::ALL_REDUCE, C::TORUS, n, {}, 1024);
  ASSERT_EQ(r.dst.size(), 128u);
  const std::vector<float>& first = r.dst.begin()->second;
  for (const auto& [core, d] : r.dst) EXPECT_EQ(d, first) << "core " << core;
  std::vector<double> sum(n, 0.0);
  for (uint32_t core = 0; core < 128; ++core) {
    const std::vector<float> v = values_of(core, n);
    for (uint64_t i = 0; i < n; ++i) sum[i] += v[i];
  }
  double worst = 0;
  for (uint64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(sum[i] - first[i]));
  EXPECT_LT(worst, 1e-4);

  s->set_timing_only(true);
  const uint64_t big = 16 << 20;  // 64 MiB
  const uint64_t torus =
      run_collective(*s, C::ALL_REDUCE, C::TORUS, big, {}, 64 << 10).run.cycles();
  isa::Collective c;
  c.set_kind(C::ALL_REDUCE);
  c.set_algorithm(C::TORUS);
  c.set_elements(big);
  const double floor = link_floor_seconds(t, plan_collective(c, t.snake_ring(), t)) * 1050e6;
  EXPECT_GE(static_cast<double>(torus), floor);
  EXPECT_LT(static_cast<double>(torus), floor * 1.01);
  EXPECT_EQ(torus, 1009415u);  // 0.961 ms; the floor is 0.955 ms
  const uint64_t torus2d =
      run_collective(*s, C::ALL_REDUCE, C::TORUS_2D, big, {}, 64 << 10).run.cycles();
  const uint64_t bidir =
      run_collective(*s, C::ALL_REDUCE, C::BIDIR_RING, big, {}, 64 << 10).run.cycles();
  EXPECT_GT(torus2d, torus * 27 / 10);
  EXPECT_GT(bidir, torus * 15 / 10);
}

}  // namespace collective_torus_test
}  // namespace tpusim::sim
