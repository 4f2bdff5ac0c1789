// The tpusim compiler without running: its fused convolutions and pools, folded broadcasts,
// recomputed producers, and the steps it refuses.
#include <algorithm>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/hbm_plan.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"
#include "sim/isa/validator.h"
#include "sim/memory/block.h"
#include "tests/runtime/program_counts.h"

namespace tpusim::runtime::tpusim_backend {
namespace tpusim_compiler_fusion_test {

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

// x -> a -> b -> c (outputs c): a is dead after b, so c can take a's buffer; reshape aliases.
// mnist_cnn's training step: both convolutions run with their patches built in VMEM and fed
// straight to the MXUs, both kernel gradients build them again tile by tile and sum over the
// tiles in VMEM, and conv2d_2's input gradient goes from the MXUs straight into col2im
// (conv2d_1's input is the image, which needs no gradient): the patches never reach HBM. With
// the max pools unfused, only they keep extract_patches and patches_to_image fragments.
TEST(Compiler, FusesConvolutionsKeepingTheirPatchesInVmem) {
  GraphBuilder b;
  ASSERT_TRUE(models::build_training_step(b, "mnist_cnn", 16, 0.1f, 1).ok());
  StepOptions fused_options, unfused_options;
  fused_options.fuse_pools = unfused_options.fuse_pools = false;
  unfused_options.fuse_convolutions = false;
  auto fused = compile_graph(b.graph(), v3_8(), 0, fused_options);
  auto unfused = compile_graph(b.graph(), v3_8(), 0, unfused_options);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_TRUE(sim::validate_program(*fused->program, v3_8()).ok());
  EXPECT_EQ(fused->fused_convolutions, 5u);
  EXPECT_EQ(unfused->fused_convolutions, 0u);
  const isa::CoreProgram& core = fused->program->cores(0);
  EXPECT_GT(instructions_of(core, "conv2d"), 0);
  EXPECT_GT(instructions_of(core, "conv2d_backprop_input"), 0);
  EXPECT_GT(instructions_of(core, "conv2d_backprop_filter"), 0);
  EXPECT_EQ(instructions_of(unfused->program->cores(0), "conv2d"), 0);
  // The max pools' im2col and col2im are left, the convolutions' are gone.
  for (const char* kind : {"extract_patches", "patches_to_image"}) {
    ASSERT_EQ(fused->instructions_per_op.count(kind), 1u) << kind;
    EXPECT_LT(fused->instructions_per_op.at(kind), unfused->instructions_per_op.at(kind)) << kind;
  }
  // No patches or patch gradients need a buffer: the step's tensors take less HBM at their peak.
  EXPECT_LT(fused->plan.peak_bytes, unfused->plan.peak_bytes);
}

// mnist_cnn's max pools (2x2, stride 2, on 28x28 and 14x14 images) and their gradients are one
// vector-unit fragment each that reads the images and never builds a window: with the
// convolutions fused too, no extract_patches, reduce_max, patches_to_image or gradient mask is
// left, the pool fragments take a handful of instructions per tile of images instead of a few
// per image row and window offset, and the windows and masks need no HBM.
TEST(Compiler, FusesMaxPoolsWithoutBuildingTheirWindows) {
  GraphBuilder b;
  ASSERT_TRUE(models::build_training_step(b, "mnist_cnn", 16, 0.1f, 1).ok());
  StepOptions unfused_options;
  unfused_options.fuse_pools = false;
  auto fused = compile_graph(b.graph(), v3_8(), 0);
  auto unfused = compile_graph(b.graph(), v3_8(), 0, unfused_options);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_TRUE(sim::validate_program(*fused->program, v3_8()).ok());
  EXPECT_EQ(fused->fused_pools, 4u);
  EXPECT_EQ(unfused->fused_pools, 0u);
  EXPECT_EQ(fused->fused_convolutions, 5u);
  for (const char* kind : {"extract_patches", "patches_to_image", "equal"}) {
    EXPECT_EQ(fused->instructions_per_op.count(kind), 0u) << kind;
    EXPECT_EQ(unfused->instructions_per_op.count(kind), 1u) << kind;
  }
  const isa::CoreProgram& core = fused->program->cores(0);
  // 16 images a core. The forwards take one tile each: a load, a max over the windows' columns,
  // one over their rows, a store. The gradients take 12 vector ops (2x2 windows) and 4 DMAs a
  // tile: 8 of max_pooling2d_1's 28x28x32 images (426 KB of VMEM each) fill a 6 MiB tile, all 16
  // of max_pooling2d_2's 14x14x64 ones fit one.
  EXPECT_EQ(instructions_of(core, "max_pool"), 2 * (2 + 2));
  EXPECT_EQ(instructions_of(core, "max_pool_grad"), (2 + 1) * (12 + 4));
  EXPECT_LT(fused->plan.peak_bytes, unfused->plan.peak_bytes);
  // The windows, hit masks and their gradients no longer cross HBM: the step moves under two
  // thirds of the bytes (49.9 against 78.8 MB), in fewer instructions (2,185 against 3,727; the
  // unfused 2x2 stride-2 windows come from the images' stride phases, a copy per kernel offset
  // and image, so instructions are no longer where the fusion saves most).
  const isa::CoreProgram& apart = unfused->program->cores(0);
  EXPECT_LT(dma_hbm_bytes(core) * 3, dma_hbm_bytes(apart) * 2);
  EXPECT_LT(core.instructions_size(), apart.instructions_size());
}

// A pool whose windows do not tile its images (7 rows in 3 windows of 2, SAME padding at stride
// 1, overlapping 3x3 windows at stride 2) is fused as well, its windows built in VMEM: no
// extract_patches or reduce_max fragment is left, and the padding mask's nodes are not needed.
TEST(Compiler, APoolWhoseWindowsDoNotTileItsImagesBuildsThemInVmem) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4, 7, 7, 8});
  b.output("odd", layers::max_pooling2d(b, x, 2, 2));
  b.output("same", layers::max_pooling2d(b, x, 3, 1, layers::Padding::kSame));
  const Value y = b.infeed("y", DType::kF32, {4, 8, 8, 8});
  b.output("tiled", layers::max_pooling2d(b, y, 2, 2));
  b.output("overlapping", layers::max_pooling2d(b, y, 3, 2, layers::Padding::kSame));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  EXPECT_EQ(step->fused_pools, 4u);
  EXPECT_EQ(step->instructions_per_op.count("max_pool"), 1u);
  for (const char* kind : {"reduce_max", "extract_patches", "add", "mul", "sub"})
    EXPECT_EQ(step->instructions_per_op.count(kind), 0u) << kind;
  StepOptions unfused;
  unfused.fuse_pools = false;
  auto apart = compile_graph(b.graph(), v3_8(), 0, unfused);
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ(apart->fused_pools, 0u);
  EXPECT_EQ(apart->instructions_per_op.count("extract_patches"), 1u);
}

// Inference: the patches have no reader but their convolution, so they never get a buffer.
TEST(Compiler, AnInferenceConvolutionsPatchesNeverReachHbm) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 28, 28, 4});
  const Value y =
      layers::conv2d(b, x, 16, 5, 1, layers::Padding::kSame, layers::Activation::kNone, 1);
  b.output("y", y);
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  EXPECT_EQ(step->fused_convolutions, 1u);
  EXPECT_EQ(step->instructions_per_op.count("extract_patches"), 0u);
  // Image, kernel, bias, the conv's output and the output with its bias: 8x28x28x4,
  // 5x5x4x16, 16 and 2 x 8x28x28x16 floats, each buffer 4 KiB aligned, and no 8x28x28x100
  // patches (2.5 MB).
  const uint64_t patches = 8u * 28 * 28 * 100 * 4;
  EXPECT_LT(step->plan.peak_bytes, patches);
}

// A row whose operands, output and scratch together overrun a VMEM tile slot is refused with its
// size, rather than spilling into the other slot: a + b of 600,000-element rows (2.4 MB each,
// under the 6 MiB slot) takes 21.6 MB a row with the output and the elementwise fragment's
// scratch.
TEST(Compiler, ARowTooWideForAVmemTileIsRefused) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 600000});
  const Value y = b.infeed("y", DType::kF32, {2, 600000});
  b.output("z", x + y);
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(
      std::string(step.status().message()),
      ::testing::HasSubstr("a row of 7200000 bytes (operands, output and scratch: 3 blocks of "
                           "512-byte aligned VMEM, 7200768 bytes) does not fit the VMEM tile "
                           "budget of 6291456 bytes"));
}

TEST(Compiler, AStepTooBigForHbmIsRefusedWithItsSize) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {1 << 14, 1 << 14});  // 1 GiB each
  Value h = x;
  for (int i = 0; i < 40; ++i) h = b.concat({h, x}, 0);  // the last is 41 x 2^14 rows: 44 GB
  b.output("y", h);
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(step.status().message()),
              ::testing::HasSubstr("(the largest: concat 'concat' f32[671744, 16384], 44023414784 "
                                   "bytes); a core has 17179869184"));
}

// A per-channel vector stretched over an image batch (batch norm's mean) and a per-row value
// stretched over its row (softmax's sum), read only by elementwise fragments of their own shape,
// are folded into them as row and column operands: no fragment writes the broadcast and it has
// no buffer. A broadcast that a matmul reads, one that is an output, and one that stretches a
// middle dim are materialised as before.
TEST(Compiler, BroadcastsReadOnlyByElementwiseFragmentsAreFolded) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 8, 8, 16});
  const Value mean = b.infeed("mean", DType::kF32, {16});
  const Value rows = b.infeed("rows", DType::kF32, {64, 10});
  const Value sums = b.infeed("sums", DType::kF32, {64});
  const Value w = b.infeed("w", DType::kF32, {10, 10});
  const Value mid = b.infeed("mid", DType::kF32, {8});
  const Value centred = x - b.broadcast(mean, x.shape(), {3});
  b.output("centred", b.unary(Op::kSquare, centred));
  b.output("normalised", rows / b.broadcast(sums, rows.shape(), {0}));
  b.output("product", b.matmul(b.broadcast(sums, rows.shape(), {0}), w));  // read by a matmul
  b.output("exported", b.broadcast(mean, x.shape(), {3}));
  b.output("middle", x * b.broadcast(mid, x.shape(), {2}));  // neither a row nor a column
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Graph& g = b.graph();
  int row = 0, column = 0, none = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (g.node(id).op != Op::kBroadcast) continue;
    const FoldedBroadcast f = broadcast_fold(g, id);
    row += f == FoldedBroadcast::kRow;
    column += f == FoldedBroadcast::kColumn;
    none += f == FoldedBroadcast::kNone;
  }
  EXPECT_EQ(row, 2);     // both of mean's
  EXPECT_EQ(column, 2);  // both of sums'
  EXPECT_EQ(none, 1);    // mid's
  auto step = compile_graph(g, v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  // Three broadcasts are written: the matmul's operand, the output and the middle one.
  EXPECT_GT(units_of(step->program->cores(0), "broadcast").vector, 0);
  int folded = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (g.node(id).op != Op::kBroadcast) continue;
    const bool has_buffer = step->plan.owner[static_cast<size_t>(id)] == id &&
                            step->plan.address[static_cast<size_t>(id)] != 0;
    folded += !has_buffer;
  }
  EXPECT_EQ(folded, 2);

  // With only the folded ones, no broadcast has an instruction.
  GraphBuilder only;
  const Value x2 = only.infeed("x", DType::kF32, {64, 8, 8, 16});
  const Value rows2 = only.infeed("rows", DType::kF32, {64, 10});
  only.output("centred",
              x2 - only.broadcast(only.infeed("mean", DType::kF32, {16}), x2.shape(), {3}));
  only.output("normalised",
              rows2 / only.broadcast(only.infeed("sums", DType::kF32, {64}), rows2.shape(), {0}));
  auto folded_step = compile_graph(only.graph(), v3_8(), 0);
  ASSERT_TRUE(folded_step.ok()) << folded_step.status();
  const UnitCounts none_left = units_of(folded_step->program->cores(0), "broadcast");
  EXPECT_EQ(none_left.dma + none_left.vector + none_left.mxu, 0);
  EXPECT_EQ(folded_step->instructions_per_op.count("broadcast"), 0u);
}

// A computed scalar (an optimizer's learning rate times its trust ratio, a bias correction) read
// by elementwise fragments, directly or through an explicit broadcast, is loaded once as a 1x1
// operand the vector ops broadcast, as XLA fuses a scalar's broadcast into its consumers: the
// fragments move x, their outputs and 4 bytes a scalar, and nothing is written at x's shape
// for the scalars (before, each was materialised at x's shape in HBM, written and read back).
TEST(Compiler, ComputedScalarsAreReadOnceNotMaterialised) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {512, 256});
  const Value y = b.infeed("y", DType::kF32, {64});
  const Value s = b.reduce(Op::kReduceMax, y, {0});  // a computed scalar, shape []
  const Value t = b.unary(Op::kExp, s);
  b.output("scaled", x * s - x / t);
  b.output("broadcast", x + b.broadcast(s, x.shape(), {}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Graph& g = b.graph();
  int scalars = 0;
  for (int id = 0; id < g.size(); ++id)
    scalars += g.node(id).op == Op::kBroadcast && broadcast_fold(g, id) == FoldedBroadcast::kScalar;
  EXPECT_EQ(scalars, 1);
  auto step = compile_graph(g, v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  const isa::CoreProgram& core = step->program->cores(0);
  EXPECT_EQ(units_of(core, "broadcast").vector, 0);
  // x read by each of the two groups, and their two outputs at x's shape: four passes of x's
  // 512 KiB, plus the small ones (y, the scalars). Less the infeed's write of x and the
  // outfeed's reads of the two outputs.
  const uint64_t x_bytes = 512 * 256 * 4;
  const uint64_t group_bytes = dma_hbm_bytes(core) - 3 * x_bytes;
  EXPECT_GE(group_bytes, 4 * x_bytes);
  EXPECT_LT(group_bytes, 4 * x_bytes + 4096);
}

// d = x - y read by two groups of its shape (two outputs) is computed again in each: it has no
// buffer and no fragment. e = exp(x), read by one of them and by a matmul, stays a buffer of its
// own, and so does an output.
TEST(Compiler, SharedElementwiseProducersAreRecomputedByTheirReaders) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 64});
  const Value y = b.infeed("y", DType::kF32, {64, 64});
  const Value d = x - y;
  const Value e = b.unary(Op::kExp, x);
  b.output("squared", d * d + 1.0f);
  b.output("scaled", d * 3.0f + e);
  b.output("product", b.matmul(e, y));
  b.output("sum", x + y);
  ASSERT_TRUE(b.status().ok()) << b.status();
  StepOptions kept;
  kept.recompute_shared_producers = false;
  auto recomputed = compile_graph(b.graph(), v3_8(), 0);
  auto materialised = compile_graph(b.graph(), v3_8(), 0, kept);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status();
  ASSERT_TRUE(materialised.ok()) << materialised.status();
  EXPECT_TRUE(sim::validate_program(*recomputed->program, v3_8()).ok());
  EXPECT_EQ(recomputed->recomputed_nodes, 1u);
  EXPECT_EQ(materialised->recomputed_nodes, 0u);
  auto has_buffer = [](const CompiledStep& step, int id) {
    return step.plan.owner[static_cast<size_t>(id)] == id &&
           step.plan.address[static_cast<size_t>(id)] != 0;
  };
  EXPECT_FALSE(has_buffer(*recomputed, d.id));
  EXPECT_TRUE(has_buffer(*materialised, d.id));
  EXPECT_TRUE(has_buffer(*recomputed, e.id));
  // d's own fragment (a load of x and y and a store per tile) is gone; its readers load x and y.
  EXPECT_EQ(recomputed->instructions_per_op.count("sub"), 0u);
  EXPECT_GT(materialised->instructions_per_op.at("sub"), 0u);
}

}  // namespace tpusim_compiler_fusion_test
}  // namespace tpusim::runtime::tpusim_backend
