// The per-op profile's bookkeeping: figures summed per origin, time as the op's span per step.
#include "sim/stats/op_profile.h"

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace {

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

}  // namespace
}  // namespace tpusim::sim
