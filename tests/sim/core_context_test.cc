// What a core's units share (sim/units/core_context.h) and what the Core wires to the units
// that use them (sim/units/core_memory.h): the context holds the core's identity and the run's
// state, each run replacing the last one's; the VMEM keeps its high-water mark and invalidates
// the LHS cache on an overlapping write; the HBM path sends each DMA request to the run's
// mirrors too; the numerics lane runs what is posted.
#include "sim/units/core_context.h"

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/units/core_memory.h"

namespace tpusim::sim {
namespace core_context_test {

// What a core's units are wired to, built as a Core and its Chip build it.
struct Wiring {
  std::shared_ptr<const config::SliceSpec> slice = *config::load_slice("v3-8");
  ClockDomain clock{slice->chip.core.clock_hz};
  CoreVmem vmem{"vmem", slice->chip.core.vmem_bytes, 64};
  NumericsWorker numerics{slice->cores, /*threaded=*/false};
  Memory hbm{"hbm", slice->chip.hbm.capacity_bytes};
  HbmTiming hbm_timing{4, 64, 256, 100};
  HbmTiming other_chips_hbm_timing{4, 64, 256, 100};
  SyncState sync{"sync", clock};
  std::vector<std::string> failures;

  // Core 3 of v3-8: core 1 of chip 1.
  CoreWiring of_core_3() {
    auto fail = [this](const std::string& message) { failures.push_back(message); };
    return CoreWiring{
        CoreId{3}, ChipId{1}, 1, clock, /*sink=*/nullptr, sync, /*unit_queue_depth=*/8, fail};
  }
};

TEST(CoreContext, HoldsWhatTheCoreWasBuiltWith) {
  Wiring w;
  CoreContext ctx(w.of_core_3(), /*timing_only=*/true);
  EXPECT_EQ(ctx.core(), CoreId{3});
  EXPECT_EQ(ctx.chip(), ChipId{1});
  EXPECT_EQ(ctx.core_on_chip(), 1u);
  EXPECT_EQ(&ctx.clock(), &w.clock);
  EXPECT_EQ(ctx.sink(), nullptr);
  EXPECT_EQ(&ctx.sync(), &w.sync);
  EXPECT_EQ(ctx.unit_queue_depth(), 8u);
  ctx.fail("core 3 instruction 0: bad");
  EXPECT_EQ(w.failures, std::vector<std::string>{"core 3 instruction 0: bad"});
  EXPECT_TRUE(ctx.timing_only());
  ctx.set_timing_only(false);
  EXPECT_FALSE(ctx.timing_only());
  ctx.set_step(7);
  EXPECT_EQ(ctx.step(), 7u);
}

TEST(CoreContext, EachRunReplacesTheLastRunsShadowFlagAndOps) {
  Wiring w;
  CoreContext ctx(w.of_core_3(), true);
  EXPECT_FALSE(ctx.shadow());
  ctx.begin_run(/*shadow=*/true, {{"dense", "matmul"}});
  EXPECT_TRUE(ctx.shadow());
  EXPECT_TRUE(ctx.shadow_flag());
  ctx.ops().record(1, 0, 10, 20, {});
  ASSERT_EQ(ctx.ops().figures().size(), 1u);
  EXPECT_EQ(ctx.ops().figures()[0].cycles, 10u);
  // A run without a stream for the core: no shadow, no ops.
  ctx.begin_run(false, {});
  EXPECT_FALSE(ctx.shadow());
  EXPECT_FALSE(ctx.shadow_flag());
  EXPECT_TRUE(ctx.ops().figures().empty());
}

TEST(CoreVmem, KeepsTheHighWaterMarkAndInvalidatesTheLhsCacheOnAnOverlappingWrite) {
  Wiring w;
  CoreVmem& vmem = w.vmem;
  EXPECT_EQ(vmem.memory().capacity(), w.slice->chip.core.vmem_bytes);
  EXPECT_EQ(vmem.ports().bytes_per_cycle(), 64);
  vmem.touch(4096);
  vmem.touch(1024);
  EXPECT_EQ(vmem.high_water(), 4096u);
  vmem.reset_high_water();
  EXPECT_EQ(vmem.high_water(), 0u);
  LhsCache& cache = vmem.lhs_cache();
  cache.valid = true;
  cache.lo = 100;
  cache.hi = 200;
  vmem.note_write(200, 300);  // beside the cached block
  EXPECT_TRUE(cache.valid);
  vmem.note_write(150, 160);  // over it
  EXPECT_FALSE(cache.valid);
}

TEST(CoreHbm, EachRequestGoesToTheRunsMirrorsToo) {
  Wiring w;
  CoreHbm hbm(w.hbm, w.hbm_timing);
  EXPECT_EQ(&hbm.memory(), &w.hbm);
  EXPECT_EQ(&hbm.timing(), &w.hbm_timing);
  hbm.set_mirrors({&w.other_chips_hbm_timing});
  const double end = hbm.transfer(0, 0, 4096);
  EXPECT_GT(end, 0);
  EXPECT_EQ(w.hbm_timing.bytes_served(), 4096);
  EXPECT_EQ(w.other_chips_hbm_timing.bytes_served(), 4096);
  // The next run folds nothing: the mirror is left alone.
  hbm.set_mirrors({});
  EXPECT_TRUE(hbm.mirrors().empty());
  hbm.transfer(end, 4096, 4096);
  EXPECT_EQ(w.hbm_timing.bytes_served(), 8192);
  EXPECT_EQ(w.other_chips_hbm_timing.bytes_served(), 4096);
}

TEST(CoreNumerics, RunsWhatIsPosted) {
  Wiring w;
  CoreNumerics numerics(w.numerics, CoreId{3}, w.vmem.memory(), w.hbm);
  int ran = 0;
  numerics.post(false, {}, {}, [&ran] { ++ran; });
  numerics.post(true, {}, {}, [&ran] { ++ran; });
  w.numerics.drain();
  EXPECT_EQ(ran, 2);
  numerics.before_vmem_access(nullptr, nullptr);  // nothing left to wait for
}

}  // namespace core_context_test
}  // namespace tpusim::sim
