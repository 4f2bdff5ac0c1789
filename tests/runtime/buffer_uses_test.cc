// The buffers each lowering declares its fragment uses (buffer_uses.h, LoweringRule::uses), as
// the planning passes see them, and the check that holds an emitted fragment to them
// (check_fragment_hbm).
#include "runtime/backend/tpusim/buffer_uses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/tpusim/step_plan.h"
#include "runtime/graph/layers.h"
#include "sim/isa/builder.h"
#include "tests/runtime/step_plan_util.h"

namespace tpusim::runtime::tpusim_backend {
namespace buffer_uses_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

using testing::plan_of;
using testing::v3_8;

TEST(BufferUses, AnOpReadsItsInputsAndWritesItselfUnlessItsRuleSaysOtherwise) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 16});
  const Value w = b.infeed("w", DType::kF32, {16, 4});
  const Value y = b.matmul(x, w);
  const Value t = b.transpose(y, {1, 0});
  const BufferUses matmul = lowering_uses(b.graph(), y.id);
  EXPECT_THAT(matmul.reads, ElementsAre(x.id, w.id));
  EXPECT_THAT(matmul.writes, ElementsAre(y.id));
  EXPECT_EQ(matmul.aliases, -1);
  const BufferUses transpose = lowering_uses(b.graph(), t.id);
  EXPECT_THAT(transpose.reads, ElementsAre(y.id));
  EXPECT_THAT(transpose.writes, ElementsAre(t.id));
}

// A dense layer's weight gradient x^T g, x [256, 1024] and g [256, 10], reads x where it lies and
// transposes its slices in VMEM: never the transpose, which is not needed.
TEST(BufferUses, AMatmulWithATransposedLhsReadsTheTransposesInput) {
  GraphBuilder b;
  const Value x = b.unary(Op::kRelu, b.infeed("x", DType::kF32, {256, 1024}));
  const Value g = b.infeed("g", DType::kF32, {256, 10});
  const Value t = b.transpose(x, {1, 0});
  const Value dw = b.matmul(t, g);
  b.output("dw", dw);
  b.output("x", x);
  ASSERT_EQ(matmul_operand_view(b.graph(), dw.id, 0).source, x.id);
  ASSERT_TRUE(matmul_operand_view(b.graph(), dw.id, 0).transposed);
  ASSERT_EQ(matmul_operand_view(b.graph(), dw.id, 1).source, g.id);
  ASSERT_FALSE(matmul_operand_view(b.graph(), dw.id, 1).transposed);
  const BufferUses uses = lowering_uses(b.graph(), dw.id);
  EXPECT_THAT(uses.reads, ElementsAre(x.id, g.id));
  EXPECT_THAT(uses.writes, ElementsAre(dw.id));
  const StepPlan plan = plan_of(b.graph());
  EXPECT_FALSE(plan.node(t.id).needed);
  EXPECT_THAT(plan.node(dw.id).reads, ElementsAre(x.id, g.id));
  EXPECT_THAT(plan.node(dw.id).writes, ElementsAre(dw.id));
}

// A fused convolution reads the images and the kernel, never the patches it builds in VMEM;
// one that keeps its patches for another reader writes them as well as its result.
TEST(BufferUses, AFusedConvolutionReadsImagesAndKernelAndWritesKeptPatches) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 28, 28, 1});
  b.output("y", layers::conv2d(b, x, 32, 5, 1, layers::Padding::kSame));
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Graph& g = b.graph();
  const StepPlan plan = plan_of(g);
  ASSERT_EQ(plan.fusions.size(), 1u);
  const auto& [conv, fusion] = *plan.fusions.begin();
  const int kernel = g.node(conv).inputs[1];
  const BufferUses uses = fragment_uses(g, plan.fusions, conv);
  EXPECT_THAT(uses.reads, ElementsAre(x.id, kernel));
  EXPECT_THAT(uses.writes, ElementsAre(conv));
  EXPECT_THAT(plan.node(conv).reads, ElementsAre(x.id, kernel));
  EXPECT_THAT(plan.node(conv).writes, ElementsAre(conv));
  // Unfused, the matmul reads the patches' buffer, as its rule declares.
  EXPECT_THAT(lowering_uses(g, conv).reads, ElementsAre(fusion.patches, kernel));
  Fusion kept = fusion;
  kept.patches_kept = true;
  EXPECT_THAT(kept.uses(conv).writes, ElementsAre(conv, fusion.patches));
}

// A cross_replica_sum reads its input and writes its own buffer; two combined into one
// all-reduce are emitted by the root, which reads both inputs and writes both sums.
TEST(BufferUses, ACombinedAllReducesRootReadsAndWritesEveryMembersBuffers) {
  GraphBuilder b;
  const Value x = b.unary(Op::kExp, b.infeed("x", DType::kF32, {16, 16}));
  const Value y = b.unary(Op::kTanh, b.infeed("y", DType::kF32, {16, 16}));
  const Value sx = b.cross_replica_sum(x);
  const Value sy = b.cross_replica_sum(y);
  b.output("sx", sx);
  b.output("sy", sy);
  const BufferUses uses = lowering_uses(b.graph(), sx.id);
  EXPECT_THAT(uses.reads, ElementsAre(x.id));
  EXPECT_THAT(uses.writes, ElementsAre(sx.id));
  StepOptions options;
  options.replicas = 8;
  options.combine.threshold_bytes = 1 << 20;
  const StepPlan plan = plan_of(b.graph(), options);
  const int root = plan.combined.root(sx.id);
  ASSERT_TRUE(root == sx.id || root == sy.id);
  const int other = root == sx.id ? sy.id : sx.id;
  EXPECT_THAT(plan.node(root).reads, UnorderedElementsAre(x.id, y.id));
  EXPECT_THAT(plan.node(root).writes, UnorderedElementsAre(sx.id, sy.id));
  EXPECT_THAT(plan.node(other).writes, IsEmpty());
}

// A reshape emits nothing: it uses no buffer of its own, but the one it aliases is needed.
// Sources (infeeds, variables, constants) emit nothing and use nothing either.
TEST(BufferUses, AReshapeUsesNothingAndAliasesItsInput) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4, 6});
  const Value e = b.unary(Op::kExp, x);
  const Value r = b.reshape(e, {24});
  b.output("r", r);
  const BufferUses uses = lowering_uses(b.graph(), r.id);
  EXPECT_THAT(uses.reads, IsEmpty());
  EXPECT_THAT(uses.writes, IsEmpty());
  EXPECT_EQ(uses.aliases, e.id);
  EXPECT_THAT(uses.needs(), ElementsAre(e.id));
  const BufferUses infeed = lowering_uses(b.graph(), x.id);
  EXPECT_TRUE(infeed.reads.empty() && infeed.writes.empty() && infeed.aliases < 0);
  const StepPlan plan = plan_of(b.graph());
  EXPECT_TRUE(plan.node(e.id).needed);
  EXPECT_TRUE(plan.node(e.id).materialized);
  EXPECT_THAT(plan.node(r.id).reads, IsEmpty());
}

// An elementwise group's fragment writes its root's buffer only: the other members stay in VMEM.
TEST(BufferUses, AFusedGroupWritesOnlyItsRoot) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 100});
  const Value e = b.unary(Op::kExp, x);
  const Value y = b.unary(Op::kTanh, e);
  b.output("y", y);
  const StepPlan plan = plan_of(b.graph());
  ASSERT_EQ(plan.node(e.id).group, y.id);
  EXPECT_THAT(plan.node(y.id).reads, ElementsAre(x.id));
  EXPECT_THAT(plan.node(y.id).writes, ElementsAre(y.id));
  EXPECT_THAT(plan.node(e.id).writes, IsEmpty());
}

// A hand-built fragment: instructions on core 0 moving [rows, cols] f32 blocks.
class FragmentCheck : public ::testing::Test {
 protected:
  isa::Block hbm(uint64_t at, uint32_t rows = 2, uint32_t cols = 8) {
    return sim::block(at, rows, cols, isa::F32);
  }
  absl::Status check(int begin = 0) {
    return check_fragment_hbm(program_.cores(0), begin, b_.size(), allowed_, 7, "matmul");
  }

  isa::Program program_;
  sim::CoreBuilder b_{&program_, 0};
  const isa::Block vmem_ = sim::block(0, 2, 8, isa::F32);
  // Reads [0x1000, 0x1100), writes [0x2000, 0x2100) (and may read it back).
  FragmentHbm allowed_{{{0x1000, 0x1100}, {0x2000, 0x2100}}, {{0x2000, 0x2100}}};
};

TEST_F(FragmentCheck, AcceptsAccessesInsideTheDeclaredBuffers) {
  b_.dma_to_vmem(hbm(0x1000), vmem_);
  b_.dma_to_vmem(hbm(0x1080), vmem_);
  b_.dma_to_hbm(vmem_, hbm(0x2000));
  b_.dma_to_vmem(hbm(0x2040), vmem_);
  EXPECT_TRUE(check().ok()) << check();
}

// A fragment that strays one row past its output fails the compile, naming the node, its op,
// the instruction and the bytes.
TEST_F(FragmentCheck, RefusesAWriteOutsideTheDeclaredBuffers) {
  b_.dma_to_vmem(hbm(0x1000), vmem_);
  // Two rows of 64 bytes: [0x20c0, 0x2100) is its own, [0x2100, 0x2140) is not.
  b_.dma_to_hbm(sim::block(0, 2, 16, isa::F32), hbm(0x20c0, 2, 16));
  const absl::Status s = check();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("node %7 (matmul): instruction 1 writes HBM [0x20c0, 0x2140), outside "
                        "the buffers its lowering declared"));
}

TEST_F(FragmentCheck, RefusesAWriteIntoABufferDeclaredOnlyAsRead) {
  b_.dma_to_hbm(vmem_, hbm(0x1000));
  EXPECT_THAT(std::string(check().message()), HasSubstr("instruction 0 writes HBM [0x1000,"));
}

TEST_F(FragmentCheck, RefusesAReadOfAnUndeclaredBuffer) {
  b_.dma_to_vmem(hbm(0x1000), vmem_);
  b_.dma_to_vmem(hbm(0x3000), vmem_);
  EXPECT_THAT(std::string(check().message()), HasSubstr("instruction 1 reads HBM [0x3000,"));
}

// Only the fragment's own instructions, from `begin` on, are held to its declarations.
TEST_F(FragmentCheck, ChecksOnlyTheFragmentsInstructions) {
  b_.dma_to_hbm(vmem_, hbm(0x5000));  // an earlier fragment's
  b_.dma_to_hbm(vmem_, hbm(0x2000));
  EXPECT_TRUE(check(1).ok());
  EXPECT_FALSE(check(0).ok());
}

// An all-reduce reads its source buffers and writes its destinations, each part of a combined
// one as a buffer of its own.
TEST_F(FragmentCheck, HoldsCollectivesToTheDeclaredBuffers) {
  b_.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0x1000, 0x2000, 64);
  EXPECT_TRUE(check().ok()) << check();
  isa::CollectivePart inside, stray;
  inside.set_src(0x1000);
  inside.set_dst(0x2000);
  inside.set_elements(32);
  stray.set_src(0x1080);
  stray.set_dst(0x2080);
  stray.set_elements(64);  // 256 bytes from 0x2080: past the destination's end
  b_.combined_all_reduce(isa::Collective::RING, {inside, stray});
  EXPECT_THAT(std::string(check().message()),
              HasSubstr("instruction 1 reads HBM [0x1080, 0x1180)"));
}

}  // namespace buffer_uses_test
}  // namespace tpusim::runtime::tpusim_backend
