// Golden cycle counts of the MXU on a v3 core (R = C = 128, so fill + drain = R + C - 2 = 254).
// Timing-only: the numbers do not depend on values. Each program is issued at cycle 0, one
// instruction per cycle; a run's cycles end when the last result is out.
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace mxu_timing_test {

using testing::make_system;

// A chain of `n` matmuls of `m` rows against k x n_cols weights, weights alternating slots.
isa::Program chain(int n, uint32_t m, uint32_t k, uint32_t n_cols,
                   isa::Precision precision = isa::DEFAULT) {
  isa::Program p;
  p.set_name("chain");
  CoreBuilder core(&p, 0);
  for (int i = 0; i < n; ++i) {
    const uint32_t slot = static_cast<uint32_t>(i % 2);
    core.load_weights(0, slot, block(0x100000 + slot * 0x10000, k, n_cols, isa::BF16));
    core.matmul(0, slot, block(0, m, k, isa::BF16), block(0x200000, m, n_cols, isa::F32), false,
                precision);
  }
  core.halt();
  return p;
}

uint64_t cycles_of(MxuPolicy policy, const isa::Program& p) {
  auto system = make_system("v3-8", {policy, /*timing_only=*/true, nullptr});
  auto run = system->run(p);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? run->cycles() : 0;
}

// load_weights 0..128, matmul streams 256 rows 128..384, last result out 254 later: 638.
TEST(MxuTiming, TpuSingleMatmul) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(1, 256, 128, 128)), 638u);
}

// Double-buffered: each next weight load (128 cycles) hides behind the 256-row stream, so the
// chain costs R + 4 x 256 + (R + C - 2) = 128 + 1024 + 254 = 1406.
TEST(MxuTiming, TpuChainHidesWeightLoads) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(4, 256, 128, 128)), 1406u);
}

// M = 64 < R: the chain waits on weight loads instead. Loads run back to back (0, 128, 256,
// 384 -> ready 128, 256, 384, 512); the last matmul streams 512..576, out at 576 + 254 = 830.
TEST(MxuTiming, TpuChainBoundByWeightLoadsWhenMIsSmall) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(4, 64, 128, 128)), 830u);
}

// A grouped matmul streams every group's rows: 4 groups of 64 rows cost what 256 rows do (638).
TEST(MxuTiming, TpuGroupedMatmulStreamsEveryGroup) {
  isa::Program p;
  CoreBuilder core(&p, 0);
  core.load_weights(0, 0, block(0x100000, 128, 128, isa::BF16));
  core.grouped_matmul(0, 0, block(0, 64, 128, isa::BF16), block(0x200000, 64, 128, isa::F32), 4,
                      128 * 128 * 2, 128 * 128 * 4, false);
  core.halt();
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, p), 638u);
}

// M = 1: 128 (weights) + 1 (one row) + 254 = 383.
TEST(MxuTiming, TpuSingleRow) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(1, 1, 128, 128)), 383u);
}

// K and N below the array size cost as much as a full tile: the data still crosses R rows and
// C columns. 128 + 200 + 254 = 582 for a 100 x 60 tile.
TEST(MxuTiming, TpuPartialTileCostsAFullTraversal) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(1, 200, 100, 60)), 582u);
}

// HIGH streams 3 passes: 128 + 3 x 256 + 254 = 1150; HIGHEST 6 passes: 128 + 1536 + 254 = 1918.
TEST(MxuTiming, TpuPrecisionPassesMultiplyStreaming) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(1, 256, 128, 128, isa::HIGH)), 1150u);
}
TEST(MxuTiming, TpuHighestIsSixPasses) {
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, chain(1, 256, 128, 128, isa::HIGHEST)), 1918u);
}

// SCALE-Sim v2 weight-stationary: every fold costs 2R + C + T - 2 = 256 + 128 + 100 - 2 = 482
// and folds never overlap: 2 folds = 964.
TEST(MxuTiming, ScaleSimFoldsNeverOverlap) {
  EXPECT_EQ(cycles_of(MxuPolicy::kScaleSimWs, chain(2, 100, 128, 128)), 964u);
}

// The same holds for partial tiles and a single row: 2 x (256 + 128 + 1 - 2) = 766.
TEST(MxuTiming, ScaleSimSingleRowFolds) {
  EXPECT_EQ(cycles_of(MxuPolicy::kScaleSimWs, chain(2, 1, 60, 100)), 766u);
}

// Two MXUs run independent chains in parallel: same 638 as one.
TEST(MxuTiming, TwoMxusRunInParallel) {
  isa::Program p;
  CoreBuilder core(&p, 0);
  for (uint32_t mxu = 0; mxu < 2; ++mxu) {
    core.load_weights(mxu, 0, block(0x100000, 128, 128, isa::BF16));
    core.matmul(mxu, 0, block(0, 256, 128, isa::BF16),
                block(0x200000 + mxu * 0x40000, 256, 128, isa::F32), false);
  }
  core.halt();
  // mxu1's load issues at cycle 2: 2 + 128 + 256 + 254 = 640.
  EXPECT_EQ(cycles_of(MxuPolicy::kTpu, p), 640u);
}

}  // namespace mxu_timing_test
}  // namespace tpusim::sim
