// A run that would pass the simulator's time horizon (kTimeHorizonPs, 53 days of simulated time)
// stops there with an error naming what still runs, instead of overflowing the kernel's 64-bit
// picosecond clock (which hung the run before the horizon existed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace horizon_test {

using ::testing::HasSubstr;

// v3-8 with HBM at `bytes_per_s`, below the 1 MB/s a config file may name.
std::unique_ptr<System> system_with_hbm_rate(double bytes_per_s) {
  auto spec = config::load_slice("v3-8");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto slow = std::make_shared<config::SliceSpec>(**spec);
  slow->chip.hbm.bandwidth_bytes_per_s = bytes_per_s;
  auto system = System::create(slow, {});
  EXPECT_TRUE(system.ok()) << system.status();
  return system.ok() ? *std::move(system) : nullptr;
}

TEST(TimeHorizon, ADmaThatWouldEndPastItStopsTheRun) {
  // 64 KiB at 1 mB/s is 6.6e7 s of simulated time, past the horizon's 4.6e6 s.
  auto system = system_with_hbm_rate(1e-3);
  ASSERT_NE(system, nullptr);
  isa::Program p;
  p.set_name("slow_dma");
  CoreBuilder c(&p, 0);
  c.dma_to_vmem(block(0, 128, 128, isa::F32), block(0, 128, 128, isa::F32));
  c.halt();
  auto run = system->run(p);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kOutOfRange);
  const std::string msg(run.status().message());
  EXPECT_THAT(
      msg, HasSubstr("program 'slow_dma' would run past the simulator's time horizon "
                     "(2^62 ps, about 53 days of simulated time): nothing is left to happen before "
                     "it after cycle 0. A rate in the slice config is far too low"));
  // 64 KiB over 32 channels: 2 KiB per channel at 1e-3 / 32 B/s is 6.5536e7 s, 6.16e16 cycles
  // at 940 MHz, until which the engine keeps its requests in flight (its data arrives an HBM
  // latency later; at this magnitude a double holds the cycle to within a few dozen).
  EXPECT_THAT(msg, ::testing::ContainsRegex(
                       "core 0: slice.chip0.core0.dma0 at instruction 0 "
                       "\\(dma.hbm_to_vmem\\): busy until cycle 616038[0-9]{11}([^0-9]|$)"));
  EXPECT_THAT(msg, HasSubstr("core 0: slice.chip0.core0.sequencer: waits for 1 issued "
                             "instruction(s) to complete"));
  // Like a deadlock, the stop is recovered from (tests/sim/recovery_test.cc): the DMA in flight
  // is dropped, and the same program stops the same way again.
  EXPECT_TRUE(system->usable());
  auto again = system->run(p);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr("nothing is left to happen before it after cycle 0."));
}

TEST(TimeHorizon, ARunThatEndsBeforeItKeepsItsCycles) {
  // 4 KiB interleaves over 16 of the 32 channels, 256 B each at 1e-2 / 32 B/s: 819,200 s.
  auto system = system_with_hbm_rate(1e-2);
  ASSERT_NE(system, nullptr);
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.dma_to_vmem(block(0, 8, 128, isa::F32), block(0, 8, 128, isa::F32));
  c.halt();
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  // 819,200 s x 940 MHz = 770,048,000,000,000 cycles, plus the HBM latency: 500 ns, 470 cycles.
  EXPECT_EQ(run->end_cycle - run->start_cycle, 770'048'000'000'000ull + 470);
}

TEST(TimeHorizon, MaxRunCyclesStopsARunAtTheCap) {
  // 64 KiB at 1 MB/s (the slowest rate a config may name) takes 0.0655 s, 61.6 million cycles:
  // past a cap of one million.
  auto spec = config::load_slice("v3-8");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto slow = std::make_shared<config::SliceSpec>(**spec);
  slow->chip.hbm.bandwidth_bytes_per_s = 1e6;
  SystemOptions options;
  options.max_run_cycles = 1'000'000;
  auto system = System::create(slow, options);
  ASSERT_TRUE(system.ok()) << system.status();
  isa::Program p;
  p.set_name("capped");
  CoreBuilder c(&p, 0);
  c.dma_to_vmem(block(0, 128, 128, isa::F32), block(0, 128, 128, isa::F32));
  c.halt();
  auto run = (*system)->run(p);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("program 'capped' would run past the run's limit of 1000000 cycles "
                        "(max_run_cycles): nothing is left to happen before it after cycle 0."));
  // Recovered: the DMA in flight dropped, the clock where the run stopped (its last event
  // before the cap, the DMA's start at cycle 0), and the next program runs from there.
  EXPECT_TRUE((*system)->usable());
  EXPECT_EQ((*system)->now_cycle(), 0u);
  isa::Program quick;
  CoreBuilder q(&quick, 0);
  q.fill(block(0, 8, 128, isa::F32), 1.0f);
  q.halt();
  auto next = (*system)->run(quick);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->start_cycle, 0u);
}

TEST(TimeHorizon, IdlingPastItIsRefused) {
  auto system = testing::make_system();
  ASSERT_NE(system, nullptr);
  const absl::Status idle = system->idle(5'000'000'000'000'000ull);
  EXPECT_EQ(idle.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(idle.message()),
              HasSubstr("idling 5000000000000000 cycles from cycle 0 would pass the simulator's "
                        "time horizon"));
  // Nothing ran, so the System still works.
  EXPECT_TRUE(system->idle(10).ok());
}

}  // namespace horizon_test
}  // namespace tpusim::sim
