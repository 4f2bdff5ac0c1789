// The tpusim compiler's planning passes (step_plan.h) on small graphs, without emitting: which
// nodes fuse, which have buffers, what each fragment reads, which all-reduces combine.
#include "runtime/backend/tpusim/step_plan.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/graph/layers.h"
#include "tests/runtime/step_plan_util.h"

namespace tpusim::runtime::tpusim_backend {
namespace step_plan_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

using testing::plan_of;
using testing::v3_8;

// exp, mul, add, tanh of one shape: one group rooted at tanh; only the root has a buffer and
// emits, and it reads what the group takes from outside: the infeed and the two scalar
// constants.
TEST(StepPlan, AnElementwiseChainIsOneGroupReadingOnlyItsOutsideInput) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 100});
  const Value e = b.unary(Op::kExp, x);
  const Value y = b.unary(Op::kTanh, e * 0.5f + 1.0f);
  b.output("y", y);
  const StepPlan plan = plan_of(b.graph());
  EXPECT_EQ(plan.node(e.id).group, y.id);
  EXPECT_EQ(plan.node(y.id).group, y.id);
  EXPECT_THAT(plan.fusion.members(y.id), ::testing::Contains(e.id));
  EXPECT_FALSE(plan.node(e.id).materialized);
  EXPECT_TRUE(plan.node(y.id).materialized);
  EXPECT_FALSE(plan.emits(e.id));
  EXPECT_TRUE(plan.emits(y.id));
  const std::vector<int>& reads = plan.node(y.id).reads;
  EXPECT_EQ(reads.size(), 3u);
  for (int in : reads) {
    EXPECT_TRUE(in == x.id || b.graph().node(in).op == Op::kConstant) << in;
    EXPECT_NE(plan.node(in).group, y.id);  // nothing of the group itself
  }
  EXPECT_TRUE(plan.node(e.id).reads.empty());  // its reads are its root's
}

// A reduction over the last axis takes the group producing its input (XLA's input fusion); with
// fuse_reductions off the group ends before it and its value gets a buffer.
TEST(StepPlan, AReductionTakesInItsInputGroupUnlessToldNotTo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 100});
  const Value t = b.unary(Op::kTanh, b.unary(Op::kExp, x));
  const Value s = b.reduce(Op::kReduceSum, t, {1});
  b.output("s", s);
  const StepPlan fused = plan_of(b.graph());
  EXPECT_EQ(fused.node(t.id).group, s.id);
  EXPECT_FALSE(fused.node(t.id).materialized);
  EXPECT_EQ(fused.fusion.fused_reductions, 1u);
  StepOptions apart;
  apart.fuse_reductions = false;
  const StepPlan unfused = plan_of(b.graph(), apart);
  EXPECT_EQ(unfused.node(t.id).group, t.id);
  EXPECT_TRUE(unfused.node(t.id).materialized);
  EXPECT_THAT(unfused.node(s.id).reads, ElementsAre(t.id));
  EXPECT_EQ(unfused.fusion.fused_reductions, 0u);
}

// conv2d is matmul(extract_patches(x), w): fused, the matmul's fragment builds the patches in
// VMEM, so they are absorbed and have no buffer; unfused, extract_patches is a fragment of its
// own writing them to HBM.
TEST(StepPlan, AConvolutionsPatchesLiveInVmemOnlyWhenFused) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 28, 28, 1});
  b.output("y", layers::conv2d(b, x, 32, 5, 1, layers::Padding::kSame));
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Graph& g = b.graph();
  int patches = -1;
  for (int id = 0; id < g.size(); ++id) {
    if (g.node(id).op == Op::kExtractPatches) patches = id;
  }
  ASSERT_GE(patches, 0);
  const StepPlan fused = plan_of(g);
  ASSERT_EQ(fused.fusions.size(), 1u);
  EXPECT_EQ(fused.fusions.begin()->second.kind, Fusion::Kind::kConvForward);
  EXPECT_EQ(fused.fusions.begin()->second.patches, patches);
  EXPECT_TRUE(fused.node(patches).absorbed);
  EXPECT_FALSE(fused.emits(patches));
  EXPECT_FALSE(fused.fusions.begin()->second.patches_kept);
  StepOptions apart;
  apart.fuse_convolutions = false;
  const StepPlan unfused = plan_of(g, apart);
  EXPECT_TRUE(unfused.fusions.empty());
  EXPECT_FALSE(unfused.node(patches).absorbed);
  EXPECT_TRUE(unfused.node(patches).materialized);
  EXPECT_TRUE(unfused.emits(patches));
  EXPECT_GT(unfused.hbm.peak_bytes, fused.hbm.peak_bytes);  // the patches' buffer
}

// Two gradients' sums within the combining threshold are one all-reduce emitted by the later
// one, which reads both inputs; the earlier emits nothing of its own.
TEST(StepPlan, CombinedAllReducesAreEmittedByTheirLastMemberReadingEveryInput) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {16, 16});
  const Value y = b.infeed("y", DType::kF32, {16, 16});
  const Value sx = b.cross_replica_sum(b.unary(Op::kExp, x));
  const Value sy = b.cross_replica_sum(b.unary(Op::kTanh, y));
  b.output("sx", sx);
  b.output("sy", sy);
  StepOptions options;
  options.replicas = 8;
  options.combine.threshold_bytes = 1 << 20;
  const StepPlan plan = plan_of(b.graph(), options);
  EXPECT_EQ(plan.combined.groups(), 1u);
  EXPECT_EQ(plan.combined.sums(), 2u);
  const int root = plan.combined.root(sx.id);
  ASSERT_TRUE(root == sx.id || root == sy.id);
  const int other = root == sx.id ? sy.id : sx.id;
  EXPECT_TRUE(plan.emits(root));
  EXPECT_FALSE(plan.emits(other));
  EXPECT_THAT(plan.node(root).reads, UnorderedElementsAre(b.graph().node(sx.id).inputs[0],
                                                          b.graph().node(sy.id).inputs[0]));
  // Emission order puts the member right before its root.
  const auto at = [&](int id) { return std::find(plan.order.begin(), plan.order.end(), id); };
  EXPECT_EQ(at(other) + 1, at(root));
  StepOptions apart = options;
  apart.combine.threshold_bytes = 0;
  const StepPlan separate = plan_of(b.graph(), apart);
  EXPECT_EQ(separate.combined.groups(), 0u);
  EXPECT_TRUE(separate.emits(sx.id) && separate.emits(sy.id));
}

// A step whose tensors outgrow the core's share of HBM is refused before anything is emitted,
// naming the largest tensor, both sizes and what holds the peak (live buffers grouped by op,
// dtype and shape, the largest first).
TEST(StepPlan, TensorsBeyondTheCoresHbmShareAreRefusedNamingTheLargest) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {1 << 16, 1 << 15});  // 8 GiB
  b.output("y", b.unary(Op::kExp, x) + b.unary(Op::kTanh, x));
  const auto plan = plan_step(b.graph(), v3_8(), 0, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("bytes of HBM at their peak (the largest: "));
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("a core has 17179869184 (its share of the chip's 34359738368)"));
  // The infeed and the sum (exp and tanh fused into it), 8 GiB each, with the compiler's
  // constants past the share.
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("At the peak: variables and constants 0 bytes; the largest live groups "
                        "1 x infeed f32[65536, 32768] (8589934592 bytes), 1 x add f32[65536, "
                        "32768] (8589934592 bytes)"));
}

}  // namespace step_plan_test
}  // namespace tpusim::runtime::tpusim_backend
