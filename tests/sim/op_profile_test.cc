// The per-op profile's bookkeeping: figures summed per origin, time as the op's span per step.
#include "sim/stats/op_profile.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace op_profile_test {

TEST(OpProfile, SumsWorkAndTakesEachStepsSpanOnce) {
  OpProfile p;
  p.reset({{"dense/matmul", "matmul"}, {"relu", "relu"}});
  // Step 0: the matmul's DMA [0, 100) overlaps its MXU work [50, 300); a stall leaves a gap
  // before its last DMA [400, 450), which still counts: the span is [0, 450).
  p.record(1, 0, 0, 100, {0, 4096});
  p.record(1, 0, 50, 300, {1e6, 0, true});
  p.record(1, 0, 400, 450, {0, 2048});
  p.record(2, 0, 450, 460, {1024, 0});
  p.record(2, 0, 460, 470, {512, 8192, false, 4096});  // a collective's share
  // Step 1: a span of 200, reported out of start order.
  p.record(1, 1, 1100, 1200, {1e6, 0, true});
  p.record(1, 1, 1000, 1050, {0, 4096});
  p.record(0, 1, 0, 5000, {1e9, 1e9});  // no origin: ignored
  p.record(7, 1, 0, 5000, {1e9, 1e9});  // beyond the table: ignored
  const auto f = p.figures();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].label, "dense/matmul");
  EXPECT_EQ(f[0].op, "matmul");
  EXPECT_EQ(f[0].flops, 2e6);
  EXPECT_EQ(f[0].mxu_flops, 2e6);
  EXPECT_EQ(f[0].hbm_bytes, 4096 + 2048 + 4096);
  EXPECT_EQ(f[0].cycles, 450u + 200u);
  EXPECT_EQ(f[0].instructions, 5u);
  EXPECT_EQ(f[1].cycles, 20u);
  EXPECT_EQ(f[1].flops, 1536);
  EXPECT_EQ(f[1].hbm_bytes, 8192);
  EXPECT_EQ(f[1].ici_bytes, 4096);
  EXPECT_EQ(f[0].ici_bytes, 0);
  EXPECT_EQ(f[1].mxu_flops, 0);
  // figures() closes open spans without consuming them; reset starts afresh.
  EXPECT_EQ(p.figures()[0].cycles, 650u);
  p.reset({{"x", "add"}});
  ASSERT_EQ(p.figures().size(), 1u);
  EXPECT_EQ(p.figures()[0].cycles, 0u);
  EXPECT_EQ(p.figures()[0].instructions, 0u);
}

// A chip's op takes, step by step, the time at least one core was inside its span for it: two
// cores that take turns at an op (core 1 starting as core 0 ends) give it both spans, so its
// bytes over its time stay within what one chip's HBM can serve; cores that drifted apart add
// no time for the gap between their spans, when neither ran it. Work is summed.
TEST(OpProfile, AChipsOpTakesTheTimeAnyOfItsCoresWasInsideIt) {
  OpProfile core0, core1;
  core0.reset({{"pool", "max_pool"}, {"add", "add"}});
  core1.reset({{"pool", "max_pool"}, {"add", "add"}});
  core0.record(1, 0, 100, 200, {10, 1000});
  core1.record(1, 0, 200, 300, {10, 1000});  // takes its turn after core 0
  core0.record(1, 1, 1000, 1100, {10, 1000});
  core1.record(1, 1, 1050, 1120, {10, 1000});  // overlaps core 0
  core1.record(1, 2, 2000, 2010, {10, 1000});  // a step only core 1 ran it in
  core0.record(1, 3, 3000, 3040, {10, 1000});
  core1.record(1, 3, 3500, 3530, {10, 1000});  // drifted 500 cycles behind core 0
  core1.record(1, 3, 3010, 3020, {10, 1000});  // (recorded out of order within the step)
  core0.record(2, 0, 300, 301, {1, 4});
  const auto chip = chip_figures({core0.figures(), core1.figures()});
  ASSERT_EQ(chip.size(), 2u);
  EXPECT_EQ(chip[0].label, "pool");
  EXPECT_EQ(chip[0].op, "max_pool");
  EXPECT_EQ(chip[0].flops, 80);
  EXPECT_EQ(chip[0].hbm_bytes, 8000);
  EXPECT_EQ(chip[0].instructions, 8u);
  // Step 3: core 0 inside it over [3000, 3040), core 1 over [3010, 3530): the union is 530
  // cycles; the two cores' spans alone add up to 560 and the hull is the same 530 here.
  EXPECT_EQ(chip[0].cycles, 200u + 120u + 10u + 530u);
  ASSERT_EQ(chip[0].spans.size(), 4u);
  EXPECT_EQ(chip[0].spans[1].start, 1000u);
  EXPECT_EQ(chip[0].spans[1].end, 1120u);
  EXPECT_EQ(chip[0].spans[3].start, 3000u);
  EXPECT_EQ(chip[0].spans[3].end, 3530u);
  // The longest core alone would credit both cores' bytes to its time.
  EXPECT_EQ(std::max(core0.figures()[0].cycles, core1.figures()[0].cycles), 700u);
  EXPECT_EQ(chip[1].cycles, 1u);
  EXPECT_TRUE(chip_figures({}).empty());
}

TEST(OpProfile, CoresThatDriftedApartAddNoTimeForTheGapBetweenThem) {
  OpProfile core0, core1;
  core0.reset({{"add", "add"}});
  core1.reset({{"add", "add"}});
  core0.record(1, 0, 100, 150, {1, 64});
  core0.record(1, 0, 150, 200, {1, 64});
  core1.record(1, 0, 900, 1000, {1, 64});  // 700 cycles after core 0 finished it
  const auto chip = chip_figures({core0.figures(), core1.figures()});
  ASSERT_EQ(chip.size(), 1u);
  EXPECT_EQ(chip[0].cycles, 200u);  // 100 on each core, not the hull's 900
  ASSERT_EQ(chip[0].spans.size(), 1u);
  EXPECT_EQ(chip[0].spans[0].start, 100u);
  EXPECT_EQ(chip[0].spans[0].end, 1000u);
}

}  // namespace op_profile_test
}  // namespace tpusim::sim
