// A core's context (sim/units/core_context.h): its wiring is what the core was built with, and
// each run's replica folding and op table replace the last run's.
#include "sim/units/core_context.h"

#include <gtest/gtest.h>

#include "configs/loader.h"

namespace tpusim::sim {
namespace {

// What a core's context is wired to, built as a Core and its Chip build it.
struct Wiring {
  std::shared_ptr<const config::SliceSpec> slice = *config::load_slice("v3-8");
  ClockDomain clock{slice->chip.core.clock_hz};
  Memory vmem{"vmem", slice->chip.core.vmem_bytes};
  BandwidthServer vmem_ports{64};
  NumericsWorker numerics{slice->cores, /*threaded=*/false};
  Memory hbm{"hbm", slice->chip.hbm.capacity_bytes};
  HbmTiming hbm_timing{4, 64, 256, 100};
  HbmTiming other_chips_hbm_timing{4, 64, 256, 100};
  SyncState sync{"sync", clock};
  FeedQueue infeed{4}, outfeed{4};
  sc_core::sc_event outfeed_pushed;
  std::vector<std::string> failures;

  // Core 3 of v3-8: core 1 of chip 1.
  CoreWiring of_core_3() {
    auto fail = [this](const std::string& message) { failures.push_back(message); };
    return CoreWiring{
        /*core=*/3, /*chip=*/1, /*core_on_chip=*/1, *slice, clock,      /*sink=*/nullptr,
        vmem,       vmem_ports, numerics,           hbm,    hbm_timing, sync,
        infeed,     outfeed,    outfeed_pushed,     fail};
  }
};

TEST(CoreContext, HoldsWhatTheCoreWasBuiltWith) {
  Wiring w;
  CoreContext ctx(w.of_core_3(), /*timing_only=*/true);
  EXPECT_EQ(ctx.core(), 3u);
  EXPECT_EQ(ctx.chip(), 1u);
  EXPECT_EQ(ctx.core_on_chip(), 1u);
  EXPECT_EQ(&ctx.slice(), w.slice.get());
  EXPECT_EQ(&ctx.clock(), &w.clock);
  EXPECT_EQ(ctx.sink(), nullptr);
  EXPECT_EQ(&ctx.vmem(), &w.vmem);
  EXPECT_EQ(&ctx.vmem_ports(), &w.vmem_ports);
  EXPECT_EQ(&ctx.hbm(), &w.hbm);
  EXPECT_EQ(&ctx.hbm_timing(), &w.hbm_timing);
  EXPECT_EQ(&ctx.sync(), &w.sync);
  EXPECT_EQ(&ctx.infeed(), &w.infeed);
  EXPECT_EQ(&ctx.outfeed(), &w.outfeed);
  EXPECT_EQ(&ctx.outfeed_pushed(), &w.outfeed_pushed);
  ctx.fail("core 3 instruction 0: bad");
  EXPECT_EQ(w.failures, std::vector<std::string>{"core 3 instruction 0: bad"});
  EXPECT_TRUE(ctx.timing_only());
  ctx.set_timing_only(false);
  EXPECT_FALSE(ctx.timing_only());
}

TEST(CoreContext, EachRunReplacesTheLastRunsFoldingAndOps) {
  Wiring w;
  CoreContext ctx(w.of_core_3(), true);
  EXPECT_FALSE(ctx.shadow());
  EXPECT_TRUE(ctx.hbm_mirrors().empty());
  ctx.begin_run({/*shadow=*/true, {&w.other_chips_hbm_timing}, {{"dense", "matmul"}}});
  EXPECT_TRUE(ctx.shadow());
  EXPECT_TRUE(ctx.shadow_flag());
  EXPECT_EQ(ctx.hbm_mirrors(), std::vector<HbmTiming*>{&w.other_chips_hbm_timing});
  ctx.ops().record(1, 0, 10, 20, {});
  ASSERT_EQ(ctx.ops().figures().size(), 1u);
  EXPECT_EQ(ctx.ops().figures()[0].cycles, 10u);
  // A run without a stream for the core: nothing folded, no ops.
  ctx.begin_run({});
  EXPECT_FALSE(ctx.shadow());
  EXPECT_FALSE(ctx.shadow_flag());
  EXPECT_TRUE(ctx.hbm_mirrors().empty());
  EXPECT_TRUE(ctx.ops().figures().empty());
}

TEST(CoreContext, KeepsTheVmemHighWaterMarkAndTheLhsCacheAsTheRunGoes) {
  Wiring w;
  CoreContext ctx(w.of_core_3(), true);
  ctx.touch_vmem(4096);
  ctx.touch_vmem(1024);
  EXPECT_EQ(ctx.vmem_high_water(), 4096u);
  ctx.reset_vmem_high_water();
  EXPECT_EQ(ctx.vmem_high_water(), 0u);
  ctx.set_step(7);
  EXPECT_EQ(ctx.step(), 7u);
  LhsCache& cache = ctx.lhs_cache();
  cache.valid = true;
  cache.lo = 100;
  cache.hi = 200;
  ctx.note_vmem_write(200, 300);  // beside the cached block
  EXPECT_TRUE(cache.valid);
  ctx.note_vmem_write(150, 160);  // over it
  EXPECT_FALSE(cache.valid);
}

}  // namespace
}  // namespace tpusim::sim
