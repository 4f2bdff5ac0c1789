// Collectives and HBM: what an all-reduce reads and writes, and the chip's HBM bandwidth shared
// with the cores' DMAs (collective_engine.h). One System per process.
#include <cmath>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "configs/overrides.h"
#include "tests/sim/collective_util.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace collective_hbm_test {

using testing::base_of;
using testing::make_system;
using testing::run_collective;
using C = isa::Collective;

constexpr uint64_t kElements = 1 << 20;  // 4 MiB of f32 per member
constexpr double kBytes = kElements * 4.0;

// v3-8 with its HBM slowed to `gb_per_s`, so that HBM rather than the links bounds collectives.
std::unique_ptr<System> v3_8_with_hbm(const std::string& gb_per_s) {
  auto base = config::load_slice("v3-8");
  EXPECT_TRUE(base.ok()) << base.status();
  auto slow =
      config::with_overrides(**base, {{"chip.hbm.bandwidth_gb_per_s", gb_per_s}}, "v3-8 slow HBM");
  EXPECT_TRUE(slow.ok()) << slow.status();
  auto system = System::create(*slow, {});
  EXPECT_TRUE(system.ok()) << system.status();
  return system.ok() ? *std::move(system) : nullptr;
}

// Each member reads its part of every segment once (the segment it starts with, then each one it
// adds to) and writes every segment of the result once: 2n bytes of HBM per member, whatever the
// ring, while the links carry 2(p-1)/p n per member. The sums are right.
TEST(CollectiveHbm, AnAllReduceReadsAndWritesEveryByteOnce) {
  auto s = make_system("v3-8");
  const std::vector<uint32_t> ring = {0, 2, 6, 4};  // core 0 of each chip
  const auto r = run_collective(*s, C::ALL_REDUCE, C::RING, kElements, ring, 1 << 20);
  EXPECT_EQ(s->stats().value("interconnect.hbm_bytes"), 4 * 2 * kBytes);
  for (uint32_t chip = 0; chip < 4; ++chip) {
    EXPECT_EQ(s->stats().value(str_cat("chip", chip, ".hbm.bytes")), 2 * kBytes) << chip;
  }
  EXPECT_EQ(s->stats().value("interconnect.bytes"), 4 * 2 * 3 / 4 * kBytes);
  std::vector<double> sum(kElements);
  for (uint32_t core : ring) {
    const std::vector<float> v = testing::values_of(core, kElements);
    for (uint64_t i = 0; i < kElements; ++i) sum[i] += v[i];
  }
  double worst = 0;
  for (uint64_t i = 0; i < kElements; ++i)
    worst = std::max(worst, std::abs(sum[i] - r.dst.at(0)[i]));
  EXPECT_LT(worst, 1e-5);
}

// With HBM at 10 GB/s an all-reduce of 4 MiB between two chips moves 8 MiB through each chip's
// HBM (0.84 ms) and 4 MiB over the links (42 us): HBM sets its time.
TEST(CollectiveHbm, ASlowHbmBoundsTheAllReduce) {
  auto s = v3_8_with_hbm("10");
  const uint64_t cycles =
      run_collective(*s, C::ALL_REDUCE, C::RING, kElements, {0, 2}, 1 << 20).run.cycles();
  const double hbm_cycles = 2 * kBytes / (10e9 / 940e6);
  EXPECT_GE(static_cast<double>(cycles), hbm_cycles);
  EXPECT_LT(static_cast<double>(cycles), hbm_cycles * 1.05);
}

// With HBM at 50 GB/s, core 1 copies 16 MiB from HBM while cores 0 and 2 all-reduce: core 0
// shares chip 0's HBM with it, so the all-reduce takes longer than alone, and the chip moves
// both's bytes.
TEST(CollectiveHbm, DmasOnTheChipShareItsHbmWithACollective) {
  auto s = v3_8_with_hbm("50");
  const auto alone = run_collective(*s, C::ALL_REDUCE, C::RING, kElements, {0, 2}, 1 << 20);
  const double alone_cycles = s->stats().value("chip0.core0.ici.collective_cycles");
  isa::Program p;
  CoreBuilder dma(&p, 1);
  const uint64_t rows = 4096, cols = 1024;  // 16 MiB of f32 in 16 copies of 1 MiB
  for (uint64_t i = 0; i < 16; ++i) {
    dma.dma_to_vmem(block(base_of(*s, 1) + i * (rows / 16) * cols * 4, rows / 16, cols, isa::F32),
                    block(0, rows / 16, cols, isa::F32));
  }
  dma.halt();
  const auto shared =
      run_collective(*s, C::ALL_REDUCE, C::RING, kElements, {0, 2}, 1 << 20, {}, std::move(p));
  const double shared_cycles = s->stats().value("chip0.core0.ici.collective_cycles");
  // Alone the all-reduce is HBM-bound (8 MiB at 50 GB/s); the copies take about a fifth of
  // chip 0's HBM from it, and all 24 MiB cannot move faster than the HBM's rate.
  EXPECT_GT(shared_cycles, alone_cycles * 1.2);
  EXPECT_GE(static_cast<double>(alone.run.cycles()), 2 * kBytes / (50e9 / 940e6));
  EXPECT_GE(static_cast<double>(shared.run.cycles()),
            (2 * kBytes + rows * cols * 4.0) / (50e9 / 940e6));
  EXPECT_EQ(s->stats().value("chip0.hbm.bytes"), 2 * kBytes + rows * cols * 4.0);
  EXPECT_EQ(s->stats().value("chip1.hbm.bytes"), 2 * kBytes);
  EXPECT_EQ(alone.dst.at(2), shared.dst.at(2));  // the same sums
}

}  // namespace collective_hbm_test
}  // namespace tpusim::sim
