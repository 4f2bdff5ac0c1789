// The tpusim compiler's fusions compute what the unfused fragments do: convolutions with their
// patches only in VMEM, max pools on strided views, reductions computing their elementwise
// inputs in VMEM, producers recomputed in each reader's fragment, and sibling reductions in one
// fragment.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/graph/optimizers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/fusion_test_graphs.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_fusion_values_test {

using testing::classification_loss;
using testing::output_loss_and_gradients;
using testing::output_loss_and_variable_gradients;
using testing::run_once;

CompileOptions unfused_convolutions() {
  CompileOptions options;
  options.fuse_convolutions = false;
  return options;
}
int kernel_gradients_rounded(const Graph& graph, const std::vector<Feeds>& feeds, size_t outputs,
                             const CompileOptions& other = unfused_convolutions());

// Fused convolutions (patches only in VMEM) compute what extract_patches, the matmuls and
// patches_to_image compute as separate fragments. The forward outputs and the input gradients
// are bit for bit the same (the MXUs sum the same depth chunks in the same order); a kernel
// gradient sums its pixels tile by tile, so its f32 sums round differently. Three convolutions
// over 20 images of 32x32x16, 8 to a VMEM tile (3 tiles): SAME at stride 1 (the flat im2col) and
// VALID at stride 2 (one copy per image row).
TEST(TpusimBackend, FusedConvolutionsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {20, 32, 32, 16});
  using layers::Activation;
  using layers::Padding;
  Value h = layers::conv2d(b, x, 16, 3, 1, Padding::kSame, Activation::kRelu, 1);
  h = layers::conv2d(b, h, 16, 3, 1, Padding::kSame, Activation::kRelu, 2);
  h = layers::conv2d(b, h, 8, 3, 2, Padding::kValid, Activation::kRelu, 3);
  ASSERT_TRUE(output_loss_and_variable_gradients(
      b, classification_loss(b, b.reshape(h, {20, 15 * 15 * 8}), 4)));
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {20, 32, 32, 16}}, {"labels", DType::kS32, {20}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 3)};

  // The loss and 4 kernels' and 4 biases' gradients; the kernel gradients summed another way.
  EXPECT_GT(kernel_gradients_rounded(b.graph(), feeds, 9), 0);
}

// A 1x1 stride-1 convolution without padding reads its images as the MXUs' input (its patches
// are the images: Im2col::identity), and its input gradient's products land in the image rows:
// no im2col copies and no col2im fills or adds. The values are what the unfused fragments
// compute (bit for bit but the kernel gradients); a 1x1 stride-2 one still copies its windows.
TEST(TpusimBackend, OneByOneConvolutionsFeedTheMxusFromTheirImages) {
  for (const int64_t stride : {1, 2}) {
    GraphBuilder b;
    const Value x = b.infeed("x", DType::kF32, {12, 16, 16, 32});
    using layers::Activation;
    using layers::Padding;
    Value h = layers::conv2d(b, x, 64, 1, 1, Padding::kSame, Activation::kRelu, 1);
    h = layers::conv2d(b, h, 32, 1, stride, Padding::kValid, Activation::kRelu, 2);
    ASSERT_TRUE(output_loss_and_variable_gradients(
        b, classification_loss(b, layers::reduce_mean(h, {1, 2}), 3)));
    // The convolutions' copies, fills and adds (im2col's and col2im's) in the step's program.
    auto moves = [&](bool pointwise) {
      tpusim_backend::StepOptions options;
      options.fuse_pointwise_convolutions = pointwise;
      auto step =
          tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0, options);
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) return -1;
      EXPECT_EQ(step->fused_convolutions, 5u);  // two forward, two kernel and one input gradient
      const isa::CoreProgram& core = (*step->program).cores(0);
      int count = 0;
      for (const isa::Instruction& i : core.instructions()) {
        if (!i.has_vector() || i.origin() == 0) continue;
        const std::string& op = core.origins(static_cast<int>(i.origin()) - 1).op();
        const isa::Vector::Op v = i.vector().op();
        count += op.rfind("conv2d", 0) == 0 &&
                 (v == isa::Vector::COPY || v == isa::Vector::FILL || v == isa::Vector::ADD);
      }
      return count;
    };
    if (stride == 1)
      EXPECT_EQ(moves(true), 0);
    else
      EXPECT_GT(moves(true), 0);
    EXPECT_GT(moves(false), moves(true));  // --fuse-pointwise-convolutions off builds them
    opcheck::OpCase c;
    c.inputs = {{"x", DType::kF32, {12, 16, 16, 32}}, {"labels", DType::kS32, {12}, 0, 4}};
    EXPECT_GE(kernel_gradients_rounded(b.graph(), {opcheck::make_feeds(c, 7)}, 7), 0) << stride;
    CompileOptions built;  // the patches built: the same values
    built.fuse_pointwise_convolutions = false;
    EXPECT_GE(kernel_gradients_rounded(b.graph(), {opcheck::make_feeds(c, 7)}, 7, built), 0);
  }
}

// A convolutional net's `outputs` outputs run with its convolutions fused and unfused (or as
// `other` compiles them): all bit for bit but the kernel gradients, which sum their pixels tile by
// tile and so within f32 rounding of the other sums. Returns how many kernel gradient values
// differ (-1: some other did).
int kernel_gradients_rounded(const Graph& graph, const std::vector<Feeds>& feeds, size_t outputs,
                             const CompileOptions& other) {
  const Outputs fused = run_once(graph, CompileOptions{}, feeds);
  const Outputs unfused = run_once(graph, other, feeds);
  EXPECT_EQ(fused.size(), outputs);
  EXPECT_EQ(fused.size(), unfused.size());
  if (fused.size() != unfused.size()) return -1;
  int rounded = 0;
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    EXPECT_EQ(f.size(), value.f.size()) << name;
    if (f.size() != value.f.size()) continue;
    const bool kernel =
        name.find("conv2d") != std::string::npos && name.find("kernel") != std::string::npos;
    float scale = 0;
    for (float v : value.f) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < f.size(); ++i) {
      if (!kernel) {
        EXPECT_EQ(f[i], value.f[i]) << name << "[" << i << "]";
        if (f[i] != value.f[i]) return -1;
      } else {
        EXPECT_NEAR(f[i], value.f[i], 1e-5f * scale) << name << "[" << i << "]";
        rounded += f[i] != value.f[i];
      }
    }
  }
  return rounded;
}

// Convolutions whose images (with their patches) do not fit a 6 MiB VMEM tile slot work in bands
// of output rows, each with the input rows its windows reach, as XLA's convolution emitter tiles
// an image (conv_bands.h): a 7x7 stride-2 SAME convolution of 180x180x4 images (90 x 90 windows
// of 196 values: 6.4 MB of patches an image, built from the images' stride phases), a 3x3 SAME
// one of the 90x90x32 result (9.3 MB) and a 3x3 stride-2 SAME one of its 90x90x64 result (its
// image and patches 6.7 MB: the input gradient of a strided convolution in bands of image
// rows), forward, kernel gradients and input gradients.
// Every convolution fuses, and they compute what the unfused fragments compute: bit for bit but
// the kernel gradients, whose sums run band by band.
TEST(TpusimBackend, BandedConvolutionsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 180, 180, 4});
  using layers::Activation;
  using layers::Padding;
  Value h = layers::conv2d(b, x, 32, 7, 2, Padding::kSame, Activation::kRelu, 1);
  h = layers::conv2d(b, h, 64, 3, 1, Padding::kSame, Activation::kRelu, 2);
  h = layers::conv2d(b, h, 8, 3, 2, Padding::kSame, Activation::kRelu, 3);
  ASSERT_TRUE(output_loss_and_variable_gradients(
      b, classification_loss(b, layers::reduce_mean(h, {1, 2}), 4)));

  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->fused_convolutions, 8u);  // 3 forward, 3 kernel gradients, 2 input gradients
  EXPECT_EQ(step->instructions_per_op.count("extract_patches"), 0u);
  EXPECT_EQ(step->instructions_per_op.count("patches_to_image"), 0u);

  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {2, 180, 180, 4}}, {"labels", DType::kS32, {2}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 7)};
  EXPECT_GT(kernel_gradients_rounded(b.graph(), feeds, 9), 0);  // 4 kernels, 4 biases
}

// Fused max pools (reduce-window and its gradient on strided views in VMEM) compute bit for bit
// what extract_patches, reduce_max, the gradient's masks and patches_to_image compute as separate
// fragments, ties included, and a gradient of -0 (a window's other pixels, times a negative
// gradient) becomes +0 as patches_to_image's sum into zeros makes it: a pool of small integers
// (levels) has windows with two, three or four equal maxima, which share the gradient, and the
// ReLUs leave windows of zeros. 24 images of 64x64x8, 11 to a gradient tile (3 tiles); a pool of
// pooled values; and a 3x3 SAME pool at stride 2, whose windows do not tile its images (the
// windowed fusion, WindowedMaxPoolsComputeWhatTheUnfusedOnesDo).
TEST(TpusimBackend, FusedMaxPoolsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {24, 64, 64, 8});
  const Value labels = b.infeed("labels", DType::kS32, {24});
  const Value levels = b.cast(b.infeed("levels", DType::kS32, {24, 16, 16, 8}), DType::kF32);
  using layers::Activation;
  using layers::Padding;
  const Value features = layers::conv2d(b, x, 8, 3, 1, Padding::kSame, Activation::kRelu, 1);
  const Value pooled = layers::max_pooling2d(b, features, 2, 2);
  Value h = layers::conv2d(b, pooled, 8, 3, 1, Padding::kSame, Activation::kRelu, 2);
  h = layers::max_pooling2d(b, layers::max_pooling2d(b, h, 2, 2), 2, 2);
  h = layers::max_pooling2d(b, h, 3, 2, Padding::kSame);
  const Value logits = layers::dense(b, b.reshape(h, {24, 4 * 4 * 8}), 4, Activation::kNone, 3);
  const Value pooled_levels = layers::max_pooling2d(b, levels, 2, 2);
  const Value loss =
      layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0}) +
      layers::reduce_mean(b.unary(Op::kSquare, pooled_levels), {0, 1, 2, 3});
  std::vector<Value> wrt{levels, features};
  for (int id : b.graph().variables()) wrt.push_back(Value{id, &b});
  auto grads = gradients(b, loss, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("loss", loss);
  b.output("pooled", pooled);
  b.output("levels_grad", (*grads)[0]);
  b.output("features_grad", (*grads)[1]);  // the first pool's gradient itself
  for (size_t i = 2; i < wrt.size(); ++i)
    b.output(b.graph().node(wrt[i].id).attrs.name, (*grads)[i]);
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {24, 64, 64, 8}},
              {"labels", DType::kS32, {24}, 0, 4},
              {"levels", DType::kS32, {24, 16, 16, 8}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};

  CompileOptions fused_options, unfused_options;
  unfused_options.fuse_pools = false;
  const Outputs fused = run_once(b.graph(), fused_options, feeds);
  const Outputs unfused = run_once(b.graph(), unfused_options, feeds);
  // The loss, the pooled values, two pools' gradients, 3 kernels' and 3 biases' gradients.
  ASSERT_EQ(fused.size(), 10u);
  int zeros = 0;
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(std::memcmp(&f[i], &value.f[i], 4), 0)
          << name << "[" << i << "]: " << f[i] << " against " << value.f[i];
    }
    if (name == "pooled") zeros = static_cast<int>(std::count(f.begin(), f.end(), 0.0f));
  }
  EXPECT_GT(zeros, 0);  // windows of ReLU zeros
  // Shared gradients: a tie of n maxima gives each 2 m / n / elements, m the window's maximum.
  const std::vector<float>& levels_grad = fused.at("levels_grad").f;
  const float unit = 2.0f / (24 * 8 * 8 * 8);
  std::set<float> shares;
  for (float v : levels_grad) {
    if (v != 0) shares.insert(v / unit);
  }
  for (float share : {3.0f / 2, 3.0f / 3, 3.0f / 4, 2.0f / 2}) {
    bool found = false;
    for (float v : shares) found |= std::abs(v - share) < 1e-4f;
    EXPECT_TRUE(found) << "no tie with the share " << share;
  }
}

// Max pools whose windows do not tile the image (overlapping, padded, or an odd image) are
// fused too, as XLA's reduce-window and select-and-scatter over windows built in VMEM
// (pool_fusion.cc), and compute bit for bit what the unfused fragments compute, ties shared
// and the padding never winning: ResNet-50's 3x3 stride-2 SAME pool on 112x112x64 images (its
// windows, 7.2 MB an image, do not fit a tile slot: bands of rows) in f32 and in bf16 (the
// quotients and the image gradient rounded as the unfused ops round them), a 3x3 stride-1
// SAME pool, and 2x2 stride-2 windows of 7x7 images (the last row and column in no window); and
// a bf16 pool whose windows tile its images (each pixel in one window: its quotient rounded once,
// with the result).
TEST(TpusimBackend, WindowedMaxPoolsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value big = b.cast(b.infeed("big", DType::kS32, {2, 112, 112, 64}), DType::kF32);
  const Value small = b.cast(b.infeed("small", DType::kS32, {4, 7, 7, 8}), DType::kF32);
  using layers::Padding;
  const Value stem = layers::max_pooling2d(b, big, 3, 2, Padding::kSame);
  const Value stem_bf16 = layers::max_pooling2d(b, b.cast(big, DType::kBF16), 3, 2, Padding::kSame);
  const Value same = layers::max_pooling2d(b, small, 3, 1, Padding::kSame);
  const Value odd = layers::max_pooling2d(b, small, 2, 2);
  const Value even = b.cast(b.infeed("even", DType::kS32, {4, 8, 8, 8}), DType::kBF16);
  const Value tiled = layers::max_pooling2d(b, even, 2, 2);  // the tiled fusion, in bf16
  Value loss = layers::reduce_mean(b.unary(Op::kSquare, stem), {0, 1, 2, 3});
  loss = loss +
         layers::reduce_mean(b.cast(b.unary(Op::kSquare, stem_bf16), DType::kF32), {0, 1, 2, 3});
  for (const Value& v : {same, odd})
    loss = loss + layers::reduce_mean(b.unary(Op::kSquare, v), {0, 1, 2, 3});
  loss = loss + layers::reduce_mean(b.cast(b.unary(Op::kSquare, tiled), DType::kF32), {0, 1, 2, 3});
  auto grads = gradients(b, loss, {big, small, even});
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("loss", loss);
  b.output("stem", stem);
  b.output("stem_bf16", b.cast(stem_bf16, DType::kF32));
  b.output("same", same);
  b.output("odd", odd);
  b.output("big_grad", (*grads)[0]);
  b.output("small_grad", (*grads)[1]);
  b.output("even_grad", b.cast((*grads)[2], DType::kF32));
  ASSERT_TRUE(b.status().ok()) << b.status();

  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->fused_pools, 10u);  // five pools and their gradients
  for (const char* kind : {"extract_patches", "reduce_max", "patches_to_image", "equal"})
    EXPECT_EQ(step->instructions_per_op.count(kind), 0u) << kind;

  opcheck::OpCase c;
  c.inputs = {{"big", DType::kS32, {2, 112, 112, 64}, -2, 3},
              {"small", DType::kS32, {4, 7, 7, 8}, -2, 3},
              {"even", DType::kS32, {4, 8, 8, 8}, -2, 3}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 9)};
  CompileOptions fused_options, unfused_options;
  unfused_options.fuse_pools = false;
  const Outputs fused = run_once(b.graph(), fused_options, feeds);
  const Outputs unfused = run_once(b.graph(), unfused_options, feeds);
  ASSERT_EQ(fused.size(), 8u);
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(std::memcmp(&f[i], &value.f[i], 4), 0)
          << name << "[" << i << "]: " << f[i] << " against " << value.f[i];
    }
  }
  // Levels from -2 to 2: windows of two or more equal maxima share their gradient, and windows
  // of negative values at the edges show that a padded position (-3e38) never wins.
  const std::vector<float>& grad = fused.at("big_grad").f;
  std::set<float> shares(grad.begin(), grad.end());
  EXPECT_GT(shares.size(), 3u);
}

// Reductions that compute their elementwise inputs in VMEM (lower_fused_reduction) against the
// same graph with those inputs written to HBM first: over the last axis bit for bit (the same
// per-row reduce), and down the rows too when one tile holds them all (one reduce of them all) or
// for a max (exact in any order); a sum over many tiles adds the tiles' partial rows in order, so
// it rounds differently from the unfused partitions, within f32 rounding of the sum. Over every
// axis the same, the partial row then summed across (the unfused one sums chunks of the flat
// value): the norm within f32 rounding, the peak exact.
TEST(TpusimBackend, FusedReductionsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 40});
  const Value y = b.infeed("y", DType::kF32, {16, 8, 8, 16});
  const Value m = b.infeed("m", DType::kF32, {16});
  const Value z = b.infeed("z", DType::kF32, {256, 32, 32, 16});
  b.output("row_sums", b.reduce(Op::kReduceSum, b.unary(Op::kExp, x) * 0.5f + x, {1}));
  b.output("row_maxima", b.reduce(Op::kReduceMax, x * x + -1.0f, {1}));
  const Value centred = y - b.broadcast(m, y.shape(), {3});
  b.output("variance", b.reduce(Op::kReduceSum, centred * centred, {0, 1, 2}));
  b.output("squares", b.reduce(Op::kReduceSum, b.unary(Op::kSquare, z), {0, 1, 2}));
  b.output("maxima", b.reduce(Op::kReduceMax, z * 2.0f, {0, 1, 2}));
  // Over every axis (a norm's sum of squares, a peak): down the rows, then across the row.
  b.output("norm", b.reduce(Op::kReduceSum, b.unary(Op::kSquare, x), {0, 1}));
  b.output("peak", b.reduce(Op::kReduceMax, z * -3.0f, {0, 1, 2, 3}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {300, 40}},
              {"y", DType::kF32, {16, 8, 8, 16}},
              {"m", DType::kF32, {16}},
              {"z", DType::kF32, {256, 32, 32, 16}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
  CompileOptions unfused_options;
  unfused_options.fuse_reductions = false;
  const Outputs fused = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs unfused = run_once(b.graph(), unfused_options, feeds);
  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->fused_reductions, 7u);
  ASSERT_EQ(fused.size(), 7u);
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    if (name != "squares" && name != "norm") {
      EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
      continue;
    }
    for (size_t i = 0; i < f.size(); ++i)
      EXPECT_NEAR(f[i], value.f[i], 1e-5f * std::abs(value.f[i])) << name << "[" << i << "]";
  }
}

// Recomputing a shared producer in each reader's fragment computes the same values bit for bit:
// a batch-norm training step (whose centred values and normalised ones several gradient
// fragments read) with and without, loss and every gradient.
TEST(TpusimBackend, RecomputedProducersComputeWhatTheMaterialisedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32, 8, 8, 16});
  const Value labels = b.infeed("labels", DType::kS32, {32});
  using layers::Activation;
  using layers::Padding;
  Value h = layers::conv2d(b, x, 16, 3, 1, Padding::kSame, Activation::kNone, 1);
  h = b.unary(Op::kRelu, layers::batch_normalization(b, h, true));
  const Value logits = layers::dense(b, b.reshape(h, {32, 8 * 8 * 16}), 4, Activation::kNone, 2);
  const Value loss = layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
  const size_t outputs = output_loss_and_gradients(b, loss, x);
  ASSERT_GT(outputs, 0u);
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {32, 8, 8, 16}}, {"labels", DType::kS32, {32}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 9)};
  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_GE(step->recomputed_nodes, 3u);  // the batch norm's shared values
  CompileOptions kept;
  kept.recompute_shared_producers = false;
  const Outputs recomputed = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs materialised = run_once(b.graph(), kept, feeds);
  ASSERT_EQ(recomputed.size(), outputs);
  for (const auto& [name, value] : materialised) {
    const std::vector<float>& f = recomputed.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
  }
}

// Sibling reductions in one fragment (XLA's multi-output fusion: a batch norm's sum and sum of
// squares, its gradient's sum(g) and sum(g (x - mean))) compute what separate fragments do: bit
// for bit when one VMEM tile holds every row (32 images of 8x8x16: one reduce of them all either
// way), within f32 rounding of the sums when the rows span many tiles (256 images of 32x32x16),
// whose partial rows each fragment adds in order over its own tiles.
TEST(TpusimBackend, SiblingReductionsComputeWhatSeparateOnesDo) {
  for (const int64_t images : {32, 256}) {
    const int64_t side = images == 32 ? 8 : 32;
    GraphBuilder b;
    const Value x = b.infeed("x", DType::kF32, {images, side, side, 16});
    const Value labels = b.infeed("labels", DType::kS32, {images});
    Value h = b.unary(Op::kRelu, layers::batch_normalization(b, x, true));
    h = layers::reduce_mean(h, {1, 2});
    const Value logits = layers::dense(b, h, 4, layers::Activation::kNone, 2);
    const Value loss =
        layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
    const size_t outputs = output_loss_and_gradients(b, loss, x);
    ASSERT_GT(outputs, 0u);
    auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(step->multi_output_fusions, 2u) << images;  // the forward pair and the gradient's
    opcheck::OpCase c;
    c.inputs = {{"x", DType::kF32, {images, side, side, 16}},
                {"labels", DType::kS32, {images}, 0, 4}};
    const std::vector<Feeds> feeds{opcheck::make_feeds(c, 3)};
    CompileOptions apart;
    apart.fuse_multi_output = false;
    const Outputs together = run_once(b.graph(), CompileOptions{}, feeds);
    const Outputs separate = run_once(b.graph(), apart, feeds);
    ASSERT_EQ(together.size(), outputs);
    for (const auto& [name, value] : separate) {
      const std::vector<float>& f = together.at(name).f;
      ASSERT_EQ(f.size(), value.f.size()) << name;
      if (images == 32) {
        EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
        continue;
      }
      float largest = 0;
      for (float v : value.f) largest = std::max(largest, std::abs(v));
      for (size_t i = 0; i < f.size(); ++i)
        EXPECT_NEAR(f[i], value.f[i], 1e-4f * largest) << name << "[" << i << "]";
    }
  }
}

// A convolution computing the reductions of its output (a batch norm's sum and sum of squares,
// Fusion::reductions) from its output tiles computes what separate fragments reading the output
// back compute: bit for bit when one tile holds every image (8 images of 8x8: one reduce of all
// the pixels either way), within f32 rounding when the convolution's tiles (one 96x96 image
// each) split the sums otherwise than the reduction's own tiles do. Forward, with the
// gradients through the batch norms, in f32 and in mixed bfloat16 (the sums then read the
// output's bf16 values, as the widened output the separate fragments read holds them).
TEST(TpusimBackend, ConvolutionOutputReductionsComputeWhatSeparateFragmentsDo) {
  for (const int64_t side : {8, 96}) {
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const int64_t images = side == 8 ? 8 : 2;
      GraphBuilder b;
      const Value x = b.infeed("x", DType::kF32, {images, side, side, 8});
      const Value h = testing::batch_normed_convolutions(b, x, dtype, {{16, 3, 1}, {8, 3, 2}});
      const size_t outputs = output_loss_and_gradients(b, classification_loss(b, h, 3), x);
      ASSERT_GT(outputs, 0u);
      auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_EQ(step->conv_output_reductions, 4u) << side;  // two batch norms' two sums
      opcheck::OpCase c;
      c.inputs = {{"x", DType::kF32, {images, side, side, 8}},
                  {"labels", DType::kS32, {images}, 0, 4}};
      const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
      CompileOptions apart;
      apart.fuse_conv_reductions = false;
      const Outputs fused = run_once(b.graph(), CompileOptions{}, feeds);
      const Outputs separate = run_once(b.graph(), apart, feeds);
      ASSERT_EQ(fused.size(), outputs);
      const int differ = testing::expect_outputs_near(fused, separate, side == 8, 2e-2f);
      if (side == 96) {
        EXPECT_GT(differ, 0) << "the sums were expected to round otherwise";
      }
    }
  }
}

}  // namespace tpusim_fusion_values_test
}  // namespace tpusim::runtime
