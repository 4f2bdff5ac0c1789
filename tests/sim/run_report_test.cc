// The typed run report (sim/run_report.h): its figures, and its JSON, which must stay what the
// System's report printed before it was typed (tests and the CLI read it by key).
#include <gtest/gtest.h>

#include "tests/sim/run_report_golden.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace {

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
  auto system = testing::make_system("v3-8", {"tpu", true, nullptr});
  auto run = system->run(small_program());
  ASSERT_TRUE(run.ok()) << run.status();
  // The golden text starts with a newline (after R"json( ) and ends with one.
  EXPECT_EQ("\n" + system->report(*run).dump(2) + "\n", std::string(testing::kSmallProgramReport));
}

}  // namespace
}  // namespace tpusim::sim
