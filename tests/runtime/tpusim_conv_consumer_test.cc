// A convolution's input gradient computes the elementwise group that is its only reader, and the
// batch norm's gradient sums that take the group in, from its image gradients in VMEM
// (fusion_plan.h, "consumers taken in by convolution input gradients"): what the gradient, the
// group and the sums compute in fragments of their own, the gradient never written.
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/fusion_test_graphs.h"
#include "tests/runtime/program_counts.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_conv_consumer_test {

using testing::classification_loss;
using testing::output_loss_and_gradients;
using testing::run_once;

// A residual block's output as ResNet's: o = relu(bn(conv(x))), then relu(bn(conv_k(o)) + o),
// each convolution with `channels` filters, the second with a k x k kernel. In the backward pass
// o's gradient is the second convolution's input gradient plus the shortcut's, masked by the
// ReLU (a group with a buffer: the first batch norm's gradient reads it), and the first batch
// norm's gradient sums take that group in. A 1x1 kernel's input gradient lands its products in
// the image rows; a 3x3 one over 16 channels sums its patch gradients (col2im); over 128, it
// reads its windows in place (conv_windows.h).
struct Block {
  int64_t kernel = 1;
  int64_t channels = 16;
};
Value residual_block(GraphBuilder& b, Value x, DType dtype, const Block& block = {}) {
  using layers::Activation;
  using layers::Padding;
  const Value in = dtype == DType::kBF16 ? b.cast(x, DType::kBF16) : x;
  const Value o = b.unary(Op::kRelu, layers::batch_normalization(
                                         b,
                                         layers::conv2d(b, in, block.channels, 3, 1, Padding::kSame,
                                                        Activation::kNone, 1, false),
                                         true));
  const Value h =
      layers::batch_normalization(b,
                                  layers::conv2d(b, o, block.channels, block.kernel, 1,
                                                 Padding::kSame, Activation::kNone, 2, false),
                                  true);
  const Value out = b.unary(Op::kRelu, h + o);
  return layers::reduce_mean(b.cast(out, DType::kF32), {1, 2});
}

// The block's training step: its loss and gradients, as outputs; their count (0: broken).
size_t block_step(GraphBuilder& b, int64_t images, int64_t side, DType dtype, const Block& block) {
  const Value x = b.infeed("x", DType::kF32, {images, side, side, 8});
  return output_loss_and_gradients(b, classification_loss(b, residual_block(b, x, dtype, block), 3),
                                   x);
}

// The block's step compiles with the ReLU's gradient and the sums taken in by the second
// convolution's input gradient, which then writes the group instead of the gradient: a pass of
// the gradient's shape fewer written and one fewer read (the sums' read of the group; the
// group's own read of the gradient is in VMEM). Off, nothing is taken in.
TEST(TpusimBackend, AnInputGradientTakesInTheGroupReadingItAndItsSums) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    GraphBuilder b;
    ASSERT_GT(block_step(b, 8, 8, dtype, {}), 0u);
    const auto slice = config::load_slice("v3-8");
    ASSERT_TRUE(slice.ok());
    auto taken = tpusim_backend::compile_graph(b.graph(), **slice, 0);
    ASSERT_TRUE(taken.ok()) << taken.status();
    tpusim_backend::StepOptions off;
    off.fuse_conv_consumers = false;
    auto written = tpusim_backend::compile_graph(b.graph(), **slice, 0, off);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(taken->conv_consumers, 1u) << dtype_name(dtype);
    EXPECT_EQ(written->conv_consumers, 0u);
    // The same convolutions fuse either way; the gradient's buffer is gone, and with it its
    // write and the sums' read of the group ([8, 8, 8, 16], 4 bytes a value as the simulator
    // moves f32, and charged at 2 for bf16).
    EXPECT_EQ(taken->fused_convolutions, written->fused_convolutions);
    EXPECT_LE(taken->plan.device_peak_bytes, written->plan.device_peak_bytes);
    const uint64_t pass = 8 * 8 * 8 * 16 * (dtype == DType::kBF16 ? 2 : 4);
    EXPECT_GE(tpusim_backend::dma_hbm_bytes(written->program->cores(0)) -
                  tpusim_backend::dma_hbm_bytes(taken->program->cores(0)),
              pass)
        << dtype_name(dtype);
  }
}

// The values: bit for bit those of the separate fragments where one tile holds every image (the
// sums then add the same rows in the same order), for each way an input gradient makes its image
// gradients, and within the sums' f32 rounding where the gradient's bands split the images
// otherwise than the sums' own tiles (2 images of 96x96).
TEST(TpusimBackend, InputGradientsTakingInTheirConsumersComputeWhatTheWrittenOnesDo) {
  struct Case {
    int64_t side;
    Block block;
  };
  for (const Case& k : {Case{8, {1, 16}}, Case{8, {3, 16}}, Case{8, {3, 128}}, Case{96, {1, 16}}}) {
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const int64_t images = k.side == 8 ? 8 : 2;
      GraphBuilder b;
      const size_t outputs = block_step(b, images, k.side, dtype, k.block);
      ASSERT_GT(outputs, 0u);
      auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_EQ(step->conv_consumers, 1u) << k.block.kernel << "x" << k.block.channels;
      opcheck::OpCase c;
      c.inputs = {{"x", DType::kF32, {images, k.side, k.side, 8}},
                  {"labels", DType::kS32, {images}, 0, 4}};
      const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
      CompileOptions written;
      written.fuse_conv_consumers = false;
      const Outputs taken = run_once(b.graph(), CompileOptions{}, feeds);
      const Outputs apart = run_once(b.graph(), written, feeds);
      ASSERT_EQ(taken.size(), outputs);
      const int differ = testing::expect_outputs_near(taken, apart, k.side == 8, 2e-2f);
      if (k.side == 96) {
        EXPECT_GT(differ, 0) << "the sums were expected to round otherwise";
      }
    }
  }
}

}  // namespace tpusim_conv_consumer_test
}  // namespace tpusim::runtime
