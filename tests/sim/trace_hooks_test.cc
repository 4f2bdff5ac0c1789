// Every instruction reaches the trace sink as a span on its unit's track, in picoseconds.
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"
#include "traces/recording_sink.h"

namespace tpusim::sim {
namespace {

TEST(TraceHooks, EveryInstructionIsASpanOnItsUnitsTrack) {
  traces::RecordingSink sink;
  auto system = testing::make_system("v3-8", {"tpu", true, &sink});
  // Tracks are declared once, at build time: per core 4 DMA engines, 2 MXUs, vpu, infeed, outfeed
  // and ici (collectives).
  EXPECT_EQ(sink.tracks().size(), 8u * 10u);
  isa::Program p;
  CoreBuilder c(&p, 3);
  const uint32_t f = c.new_flag();
  c.load_weights(1, 0, block(0x100000, 128, 128, isa::BF16));
  c.matmul(1, 0, block(0, 256, 128, isa::BF16), block(0x200000, 256, 128, isa::F32), false)
      .signal(f);
  c.fill(block(0x300000, 8, 128, isa::F32), 0).wait(f, 1);
  c.halt();
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();

  // Core 3 is core 1 of chip 1.
  const auto mxu = sink.slices_on(1, 1, "mxu1");
  ASSERT_EQ(mxu.size(), 2u);
  const ClockDomain& clock = system->clock();
  // load_weights 0..128, matmul streams 128..384 (its results are out at 638).
  EXPECT_EQ(mxu[0].name, "mxu.load_weights");
  EXPECT_EQ(mxu[0].start, clock.time_of(Cycles(0)));
  EXPECT_EQ(mxu[0].end, clock.time_of(Cycles(128)));
  EXPECT_EQ(mxu[1].name, "mxu.matmul");
  EXPECT_EQ(mxu[1].start, clock.time_of(Cycles(128)));
  EXPECT_EQ(mxu[1].end, clock.time_of(Cycles(384)));
  // The fill waits for the matmul's results: one vreg from 638 to 639.
  const auto vpu = sink.slices_on(1, 1, "vpu");
  ASSERT_EQ(vpu.size(), 1u);
  EXPECT_EQ(vpu[0].name, "vpu.fill");
  EXPECT_EQ(vpu[0].start, clock.time_of(Cycles(638)));
  EXPECT_EQ(vpu[0].end, clock.time_of(Cycles(639)));
  // Nothing else ran anywhere.
  EXPECT_EQ(sink.slices().size(), 3u);
}

TEST(TraceHooks, StatsTreeHasUnitsAndDescriptions) {
  auto system = testing::make_system("v3-8", {"tpu", true, nullptr});
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.dma_to_vmem(block(0, 64, 1024, isa::F32), block(0, 64, 1024, isa::F32));
  c.halt();
  ASSERT_TRUE(system->run(p).ok());
  const auto described = system->stats().to_json(true);
  const auto& dma = described["chip0"]["core0"]["dma0"];
  EXPECT_EQ(dma["bytes"]["value"].get<double>(), 64.0 * 1024 * 4);
  EXPECT_EQ(dma["bytes"]["unit"], "bytes");
  EXPECT_FALSE(dma["busy_cycles"]["description"].get<std::string>().empty());
  EXPECT_EQ(system->stats().value("chip0.hbm.bytes"), 64.0 * 1024 * 4);
  EXPECT_EQ(system->stats().value("chip0.core0.vmem.high_water_bytes"), 64.0 * 1024 * 4);
}

}  // namespace
}  // namespace tpusim::sim
