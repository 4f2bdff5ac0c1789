// Convolutions whose MXUs read their windows in place (conv_windows.h) compute what the patches
// built in VMEM compute, with no im2col copies and no col2im adds.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/conv_windows.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/fusion_test_graphs.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_conv_windows_test {

using testing::classification_loss;
using testing::output_loss_and_variable_gradients;
using testing::run_once;

// Windows are read in place where every kernel offset's channels fill whole MXU chunks (128 on
// every shipped chip), or the kernel has one offset; a 64-channel or 3-channel 3x3 or 7x7 kernel
// keeps its patches, which fold offsets into the array's depth.
TEST(ConvWindows, ReadInPlaceOnlyWhereTheChannelsFillTheMxus) {
  const auto slice = config::load_slice("v4-16");
  ASSERT_TRUE(slice.ok()) << slice.status();
  const config::CoreSpec& core = (*slice)->chip.core;
  auto fills = [&](int64_t k, int64_t stride, int64_t channels, bool input_grad) {
    Window w;
    w.kh = w.kw = k;
    w.sh = w.sw = stride;
    w.pad_top = w.pad_left = (k - 1) / 2;
    const int64_t out = 56 / stride;
    const tpusim_backend::Im2col g(w, Shape({1, 56, 56, channels}),
                                   Shape({1, out, out, k * k * channels}));
    return tpusim_backend::windows_fill_mxus(core, g, input_grad);
  };
  EXPECT_TRUE(fills(3, 1, 128, false));
  EXPECT_TRUE(fills(3, 2, 256, false));
  EXPECT_TRUE(fills(3, 1, 256, true));
  EXPECT_TRUE(fills(1, 2, 3, false));  // one offset: nothing to fold
  EXPECT_FALSE(fills(3, 1, 64, false));
  EXPECT_FALSE(fills(3, 1, 192, true));
  EXPECT_FALSE(fills(7, 2, 3, false));
}

// Kinds of a step's convolution fragments' vector copies and adds (im2col's and col2im's), and
// its grouped matmuls.
struct ConvWork {
  int copies_and_adds = 0;
  int grouped_matmuls = 0;
};
ConvWork conv_work(const Graph& graph, bool windows) {
  tpusim_backend::StepOptions options;
  options.fuse_conv_windows = windows;
  auto step = tpusim_backend::compile_graph(graph, **config::load_slice("v3-8"), 0, options);
  EXPECT_TRUE(step.ok()) << step.status();
  ConvWork work;
  if (!step.ok()) return work;
  EXPECT_EQ(step->fused_convolutions, 8u);  // three forward, three kernel, two input gradients
  const isa::CoreProgram& core = (*step->program).cores(0);
  for (const isa::Instruction& i : core.instructions()) {
    if (i.origin() == 0) continue;
    const std::string& op = core.origins(static_cast<int>(i.origin()) - 1).op();
    if (op != "conv2d" && op != "conv2d_backprop_input") continue;  // kernel gradients: patches
    if (i.has_matmul()) work.grouped_matmuls += i.matmul().groups() > 1;
    if (!i.has_vector()) continue;
    const isa::Vector::Op v = i.vector().op();
    work.copies_and_adds += v == isa::Vector::COPY || v == isa::Vector::ADD;
  }
  return work;
}

// A 3x3 SAME convolution at stride 1 and one at stride 2 over 128 channels and a 1x1 stride-2
// one over 128 (6 images of 12x12): with the windows read in place their forward passes and input
// gradients have no copies or adds (their offsets as grouped matmuls), and every value, the loss
// and every gradient, is the patches': each output pixel sums the same 128-deep chunks in the
// same order on one MXU, and a chunk's f32 sum may differ in its last bit only where a group of a
// few rows (6 windows a row here) takes another of Eigen's product kernels than a tile's
// hundreds of rows (here 2 of the first bias's 128 gradients, by 1e-7 of their value).
TEST(ConvWindows, ConvolutionsReadingTheirWindowsComputeWhatThePatchesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {6, 12, 12, 128});
  using layers::Activation;
  using layers::Padding;
  Value h = layers::conv2d(b, x, 128, 3, 1, Padding::kSame, Activation::kRelu, 1);
  h = layers::conv2d(b, h, 128, 3, 2, Padding::kSame, Activation::kRelu, 2);
  h = layers::conv2d(b, h, 16, 1, 2, Padding::kValid, Activation::kRelu, 3);
  ASSERT_TRUE(output_loss_and_variable_gradients(
      b, classification_loss(b, layers::reduce_mean(h, {1, 2}), 4)));

  const ConvWork windows = conv_work(b.graph(), true);
  const ConvWork patches = conv_work(b.graph(), false);
  EXPECT_EQ(windows.copies_and_adds, 0);
  EXPECT_GT(windows.grouped_matmuls, 0);
  EXPECT_GT(patches.copies_and_adds, 0);
  EXPECT_EQ(patches.grouped_matmuls, 0);

  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {6, 12, 12, 128}}, {"labels", DType::kS32, {6}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
  CompileOptions built;
  built.fuse_conv_windows = false;
  const Outputs read = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs copied = run_once(b.graph(), built, feeds);
  ASSERT_EQ(read.size(), 9u);  // the loss, the 3 convolutions' and the dense layer's gradients
  ASSERT_EQ(read.size(), copied.size());
  for (const auto& [name, value] : copied) {
    const std::vector<float>& f = read.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    float scale = 0;
    for (float v : value.f) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < f.size(); ++i)
      EXPECT_NEAR(f[i], value.f[i], 1e-6f * scale) << name << "[" << i << "]";
  }
}

}  // namespace tpusim_conv_windows_test
}  // namespace tpusim::runtime
