// The typed run report (sim/run_report.h): its figures, and its JSON, which must stay what the
// System's report printed before it was typed (tests and the CLI read it by key).
#include <gtest/gtest.h>

#include "tests/sim/run_report_golden.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace run_report_test {

// Cores 0 and 1 (chip 0) each load weights, multiply and copy from HBM under three ops; core 2
// (chip 1) only fills VMEM, so chip 1 moves no HBM bytes and has no entry in "chips".
isa::Program small_program() {
  isa::Program p;
  for (uint32_t core : {0u, 1u}) {
    CoreBuilder c(&p, core);
    const uint32_t f = c.new_flag();
    c.set_origin("dense/matmul", "matmul");
    c.load_weights(core, 0, block(0x100000, 128, 128, isa::BF16));
    c.matmul(core, 0, block(0, 256, 128, isa::BF16), block(0x200000, 256, 128, isa::F32), false)
        .signal(f);
    c.set_origin("relu", "relu");
    c.unary(isa::Vector::RELU, block(0x300000, 8, 128, isa::F32), block(0x200000, 8, 128, isa::F32))
        .wait(f, 1);
    c.set_origin("load", "copy");
    c.dma_to_vmem(block(core * 0x400000, 16, 1024, isa::F32), block(0x400000, 16, 1024, isa::F32),
                  core);
    c.set_origin("", "");
    c.halt();
  }
  CoreBuilder c(&p, 2);
  c.set_origin("zeros", "fill");
  c.fill(block(0, 8, 128, isa::F32), 0);
  c.halt();
  return p;
}

TEST(RunReport, JsonIsWhatTheReportPrintedBeforeItWasTyped) {
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  auto run = system->run(small_program());
  ASSERT_TRUE(run.ok()) << run.status();
  // The golden text starts with a newline (after R"json( ) and ends with one.
  EXPECT_EQ("\n" + system->report(*run).to_json().dump(2) + "\n",
            std::string(testing::kSmallProgramReport));
}

TEST(RunReport, HoldsEachCoresAndChipsFigures) {
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  auto run = system->run(small_program());
  ASSERT_TRUE(run.ok()) << run.status();
  const RunReport report = system->report(*run);
  EXPECT_EQ(report.cycles, run->cycles());
  EXPECT_DOUBLE_EQ(report.seconds, static_cast<double>(run->cycles()) / 940e6);
  ASSERT_EQ(report.cores.size(), 3u);
  const CoreReport& core1 = report.cores[1];
  EXPECT_EQ(core1.core, CoreId{1});
  EXPECT_FALSE(core1.shadow);
  EXPECT_EQ(core1.cycles, run->cores[1].cycles);
  // Per core: 4 DMA engines, 2 MXUs, vpu, infeed, outfeed and ici, in that order.
  ASSERT_EQ(core1.units.size(), 10u);
  EXPECT_EQ(core1.units.front().name, "dma0");
  EXPECT_EQ(core1.units.back().name, "ici");
  // Core 1 multiplied on its MXU 1 and copied on its DMA engine 1.
  ASSERT_NE(core1.unit("mxu1"), nullptr);
  EXPECT_GT(core1.unit("mxu1")->busy_cycles, 0u);
  EXPECT_DOUBLE_EQ(
      core1.unit("mxu1")->utilization,
      static_cast<double>(core1.unit("mxu1")->busy_cycles) / static_cast<double>(core1.cycles));
  ASSERT_NE(core1.unit("dma1"), nullptr);
  EXPECT_GT(core1.unit("dma1")->busy_cycles, 0u);
  EXPECT_EQ(core1.unit("dma0")->busy_cycles, 0u);
  EXPECT_EQ(core1.unit("sequencer"), nullptr);  // not a unit
  EXPECT_GT(core1.mxu_utilization, 0);
  ASSERT_EQ(core1.ops.size(), 3u);
  EXPECT_EQ(core1.ops[2].label, "load");
  // Only chip 0 moved HBM bytes: both its cores' copies, 64 KiB each.
  ASSERT_EQ(report.chips.size(), 1u);
  const ChipReport* chip0 = report.chip(ChipId{0});
  ASSERT_NE(chip0, nullptr);
  EXPECT_EQ(report.chip(ChipId{1}), nullptr);
  EXPECT_DOUBLE_EQ(chip0->hbm_bytes, 2.0 * 16 * 1024 * 4);
  EXPECT_DOUBLE_EQ(chip0->hbm_achieved_bytes_per_s, chip0->hbm_bytes / report.seconds);
  EXPECT_DOUBLE_EQ(chip0->hbm_peak_bytes_per_s, 900e9);
  // The chip's ops sum its cores' work.
  ASSERT_EQ(chip0->ops.size(), 3u);
  EXPECT_EQ(chip0->ops[0].instructions, 4u);
  EXPECT_DOUBLE_EQ(chip0->ops[0].flops, 2 * report.cores[0].ops[0].flops);
}

}  // namespace run_report_test
}  // namespace tpusim::sim
