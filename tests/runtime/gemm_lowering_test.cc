// The lowered GEMM on a simulated core: values against Eigen for edge shapes, and cycles.
#include <iostream>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/lowering/gemm.h"
#include "sim/memory/block.h"
#include "sim/numerics/reference.h"
#include "sim/system.h"

namespace tpusim::runtime {
namespace gemm_lowering_test {

using sim::MatrixF;

std::unique_ptr<sim::System> make_system(bool timing_only = false) {
  auto spec = config::load_slice("v3-8");
  auto system = sim::System::create(*spec, {sim::MxuPolicy::kTpu, timing_only, nullptr});
  EXPECT_TRUE(system.ok()) << system.status();
  return std::move(*system);
}

// Shapes at the edges: K or N not a multiple of 128, M < 128, M = 1, several tiles with partial
// last tiles in every dimension.
TEST(GemmLowering, EdgeShapesMatchEigen) {
  auto system = make_system();
  const GemmShape shapes[] = {
      {1, 128, 128}, {1, 1, 1}, {64, 100, 60}, {127, 129, 255}, {1030, 1100, 700}};
  uint32_t seed = 1;
  for (const GemmShape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.m << "x" << s.k << "x" << s.n);
    GemmLayout layout;
    pack_gemm_layout(s, isa::F32, 1 << 20, &layout);
    const MatrixF a = sim::random_uniform(s.m, s.k, seed++);
    const MatrixF b = sim::random_uniform(s.k, s.n, seed++);
    ASSERT_TRUE(system->write_hbm(sim::ChipId{1}, layout.a_address, a.data(), 4 * a.size()).ok());
    ASSERT_TRUE(system->write_hbm(sim::ChipId{1}, layout.b_address, b.data(), 4 * b.size()).ok());
    auto plan = lower_gemm(system->slice(), 2, s, isa::DEFAULT, layout);  // core 2 is on chip 1
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto run = system->run(plan->program);
    ASSERT_TRUE(run.ok()) << run.status();
    MatrixF c(s.m, s.n);
    ASSERT_TRUE(system->read_hbm(sim::ChipId{1}, layout.c_address, c.data(), 4 * c.size()).ok());
    EXPECT_LT(sim::max_rel_error(c, sim::rounded_to_bf16(a) * sim::rounded_to_bf16(b)), 2e-6);
  }
}

// A GEMM lowered for a core of 64 KiB of VMEM (16 x 64 x 64 tiles, below the 128 x 128 array)
// computes the product to the same tolerance (its sums run in 64-deep chunks rather than 128).
TEST(GemmLowering, TinyVmemTilesMatchEigen) {
  auto system = make_system();
  config::SliceSpec small = system->slice();
  small.chip.core.vmem_bytes = 64 << 10;
  const GemmShape s{100, 300, 200};
  GemmLayout layout;
  pack_gemm_layout(s, isa::F32, 1 << 20, &layout);
  const MatrixF a = sim::random_uniform(s.m, s.k, 11);
  const MatrixF b = sim::random_uniform(s.k, s.n, 12);
  ASSERT_TRUE(system->write_hbm(sim::ChipId{0}, layout.a_address, a.data(), 4 * a.size()).ok());
  ASSERT_TRUE(system->write_hbm(sim::ChipId{0}, layout.b_address, b.data(), 4 * b.size()).ok());
  auto plan = lower_gemm(small, 0, s, isa::DEFAULT, layout);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tiling.tk, 64u);
  EXPECT_LE(plan->vmem_bytes, small.chip.core.vmem_bytes);
  auto run = system->run(plan->program);
  ASSERT_TRUE(run.ok()) << run.status();
  MatrixF c(s.m, s.n);
  ASSERT_TRUE(system->read_hbm(sim::ChipId{0}, layout.c_address, c.data(), 4 * c.size()).ok());
  EXPECT_LT(sim::max_rel_error(c, sim::rounded_to_bf16(a) * sim::rounded_to_bf16(b)), 2e-6);
}

// One tile, one k slice. HBM moves 900e9 / 940e6 = 957.45 B/cycle over 32 channels (29.92 each),
// interleaved every 256 B, with 470 cycles (500 ns) of latency.
//   A, 512 B at 0, issued at cycle 0: channels 0-1 take 256 B each, 8.56 cycles.
//   B, 64 KiB at 4096, issued at 1: 2048 B on each channel; channels 0-1 are free only at 8.56,
//     so the last byte moves at 8.56 + 68.45 = 77.00 and lands at 77.00 + 470 = 547.005 -> 548.
//   Weights load 548..676; the single row streams 676..677 and is out at 677 + 254 = 931.
//   The write-back (512 B at 69632, channels 16-17) lands at 931 + 8.56 + 470 = 1409.6 -> 1410.
TEST(GemmLowering, SingleRowGemmCycles) {
  auto system = make_system(true);
  GemmLayout layout;
  pack_gemm_layout({1, 128, 128}, isa::F32, 0, &layout);
  auto plan = lower_gemm(system->slice(), 0, {1, 128, 128}, isa::DEFAULT, layout);
  ASSERT_TRUE(plan.ok());
  auto run = system->run(plan->program);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->cycles(), 1410u);
}

TEST(GemmLowering, LargeGemmKeepsTheMxusBusy) {
  auto system = make_system(true);
  GemmLayout layout;
  const GemmShape s{2048, 2048, 2048};
  pack_gemm_layout(s, isa::F32, 0, &layout);
  auto plan = lower_gemm(system->slice(), 0, s, isa::DEFAULT, layout);
  ASSERT_TRUE(plan.ok());
  auto run = system->run(plan->program);
  ASSERT_TRUE(run.ok());
  // Ideal: 2048^3 MACs / (2 MXUs x 128 x 128 per cycle) = 262,144 cycles.
  EXPECT_GT(system->report(*run).cores.at(0).mxu_utilization, 0.97);
  EXPECT_LT(run->cycles(), 262144u * 103 / 100);
}

// 64 output columns are one column sub-tile, fewer than the core's 2 MXUs: each tile's rows
// are split between them, so both stream and the whole runs near their combined peak.
TEST(GemmLowering, NarrowGemmSplitsRowsOverTheMxus) {
  auto system = make_system(true);
  GemmLayout layout;
  const GemmShape s{8192, 512, 64};
  pack_gemm_layout(s, isa::F32, 0, &layout);
  auto plan = lower_gemm(system->slice(), 0, s, isa::DEFAULT, layout);
  ASSERT_TRUE(plan.ok());
  uint64_t rows_per_mxu[2] = {0, 0};
  for (const auto& in : plan->program.cores(0).instructions()) {
    if (in.has_matmul()) rows_per_mxu[in.matmul().mxu()] += in.matmul().lhs().rows();
  }
  // 8 row tiles x 4 K sub-tiles, half of each tile's 1024 rows on each MXU.
  EXPECT_EQ(rows_per_mxu[0], 8u * 4 * 512);
  EXPECT_EQ(rows_per_mxu[1], 8u * 4 * 512);
  auto run = system->run(plan->program);
  ASSERT_TRUE(run.ok());
  const sim::RunReport report = system->report(*run);
  // Measured: 0.33 of the 2 x 128 x 128 peak (the array is half used at 64 columns, and A
  // streams from HBM at 16 MACs per byte); with the rows on one MXU it was 0.22.
  EXPECT_GT(report.cores.at(0).mxu_utilization, 0.3);
}

}  // namespace gemm_lowering_test
}  // namespace tpusim::runtime
