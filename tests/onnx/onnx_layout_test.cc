// Images in the file's NCHW order held NHWC on the device: convolutions, pools and the global
// pool against naive NCHW loops, and the transposes an exporter writes around them moving no
// data (none reach the graph).
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/numerics/random.h"
#include "tests/onnx/onnx_test_util.h"

namespace tpusim::runtime::onnx_import {
namespace onnx_layout_test {

using testing::count_ops;
using testing::import_and_run;

std::vector<float> random_values(int64_t n, uint64_t seed) {
  sim::RandomStream rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(2 * rng.uniform() - 1);
  return v;
}

// "{a, b, c}" for the text syntax.
std::string list(const std::vector<float>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// Naive NCHW convolution: x [N, C, H, W], w [F, C / groups, KH, KW], zero padding, taps `dil`
// apart.
std::vector<double> conv_nchw(const std::vector<float>& x, const std::vector<float>& w, int n,
                              int c, int h, int wd, int f, int kh, int kw, int stride, int pad_t,
                              int pad_l, int oh, int ow, int groups, int dil_h = 1, int dil_w = 1) {
  std::vector<double> y(static_cast<size_t>(n * f * oh * ow), 0.0);
  const int cg = c / groups, fg = f / groups;
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < f; ++o)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          double s = 0;
          const int g = o / fg;
          for (int ci = 0; ci < cg; ++ci)
            for (int p = 0; p < kh; ++p)
              for (int q = 0; q < kw; ++q) {
                const int r = i * stride + p * dil_h - pad_t;
                const int col = j * stride + q * dil_w - pad_l;
                if (r < 0 || r >= h || col < 0 || col >= wd) continue;
                const int chan = g * cg + ci;
                s += x[static_cast<size_t>(((b * c + chan) * h + r) * wd + col)] *
                     w[static_cast<size_t>(((o * cg + ci) * kh + p) * kw + q)];
              }
          y[static_cast<size_t>(((b * f + o) * oh + i) * ow + j)] = s;
        }
  return y;
}

// A padded, strided NCHW Conv with bias, as torch.onnx writes it: NCHW in and out.
TEST(OnnxLayout, StridedPaddedConvMatchesNaiveNchw) {
  const int n = 2, c = 3, h = 7, w = 6, f = 4, k = 3;
  const auto weights = random_values(f * c * k * k, 1);
  const auto bias = random_values(f, 2);
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
conv (float[N, 3, 7, 6] X) => (float[N, 4, 4, 3] Y)
<float[4, 3, 3, 3] W = )" + list(weights) +
                           ", float[4] B = " + list(bias) + R"(>
{
  Y = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 0]> (X, W, B)
}
)";
  const auto x = random_values(n * c * h * w, 3);
  auto run = import_and_run(text, n, {{"X", HostTensor::from({n, c, h, w}, x)}});
  ASSERT_TRUE(run.ok()) << run.status();
  const auto ref = conv_nchw(x, weights, n, c, h, w, f, k, k, 2, 1, 1, 4, 3, 1);
  const HostTensor& y = run->outputs.at("Y");
  ASSERT_EQ(y.shape, Shape({n, f, 4, 3}));
  for (size_t i = 0; i < ref.size(); ++i) {
    const double b = bias[(i / 12) % f];
    EXPECT_NEAR(y.f[i], ref[i] + b, 1e-5) << i;
  }
  // The kernel is a [kh, kw, in, out] variable, as the zoo's conv2d holds it.
  EXPECT_EQ(run->imported.initial_values.at("W").shape, Shape({3, 3, 3, 4}));
}

// tf2onnx's Keras CNN: an NHWC input, a Transpose to NCHW, Conv, Relu, MaxPool,
// GlobalAveragePool, Flatten and Gemm. The image stays NHWC on the device: the graph has no
// transpose at all (the global pool's [N, C, 1, 1] flattens by a reshape).
TEST(OnnxLayout, ExportersTransposesMoveNoData) {
  const auto weights = random_values(4 * 2 * 3 * 3, 4);
  const auto dense = random_values(4 * 3, 5);
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
cnn (float[N, 6, 6, 2] image) => (float[N, 3] logits)
<float[4, 2, 3, 3] K = )" + list(weights) +
                           ", float[4, 3] D = " + list(dense) + R"(>
{
  T = Transpose <perm = [0, 3, 1, 2]> (image)
  C = Conv <kernel_shape = [3, 3], auto_pad = "SAME_UPPER"> (T, K)
  R = Relu (C)
  P = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (R)
  G = GlobalAveragePool (P)
  F = Flatten (G)
  logits = Gemm (F, D)
}
)";
  const int n = 2;
  const auto x = random_values(n * 6 * 6 * 2, 6);
  auto run = import_and_run(text, n, {{"image", HostTensor::from({n, 6, 6, 2}, x)}});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(count_ops(run->graph, Op::kTranspose), 0);
  // Reference: NHWC -> NCHW, conv (SAME: one zero each side), relu, 2x2 max pool, mean, dense.
  std::vector<float> nchw(x.size());
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j)
        for (int ch = 0; ch < 2; ++ch)
          nchw[static_cast<size_t>(((b * 2 + ch) * 6 + i) * 6 + j)] =
              x[static_cast<size_t>(((b * 6 + i) * 6 + j) * 2 + ch)];
  const auto conv = conv_nchw(nchw, weights, n, 2, 6, 6, 4, 3, 3, 1, 1, 1, 6, 6, 1);
  for (int b = 0; b < n; ++b) {
    double pooled[4] = {0, 0, 0, 0};
    for (int o = 0; o < 4; ++o)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          double m = 0;  // after the ReLU every value is >= 0
          for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q)
              m = std::max(
                  m, conv[static_cast<size_t>(((b * 4 + o) * 6 + 2 * i + p) * 6 + 2 * j + q)]);
          pooled[o] += m / 9;
        }
    for (int k = 0; k < 3; ++k) {
      double v = 0;
      for (int o = 0; o < 4; ++o) v += pooled[o] * dense[static_cast<size_t>(o * 3 + k)];
      EXPECT_NEAR(run->outputs.at("logits").f[static_cast<size_t>(b * 3 + k)], v, 1e-5);
    }
  }
}

// tf2onnx's one-channel input: a Reshape [N, 28, 28, 1] -> [N, 1, 28, 28] where a Transpose
// would be, which moves no data either.
TEST(OnnxLayout, AOneChannelReshapeToNchwMovesNoData) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
one (float[N, 4, 4, 1] X) => (float[N, 2, 4, 4] Y)
<float[2, 1, 1, 1] W = {2, -1}, int64[4] nchw = {-1, 1, 4, 4}>
{
  T = Reshape (X, nchw)
  Y = Conv <kernel_shape = [1, 1]> (T, W)
}
)";
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  auto run = import_and_run(text, 1, {{"X", HostTensor::from({1, 4, 4, 1}, x)}});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(count_ops(run->graph, Op::kTranspose), 1);  // the output back to NCHW only
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(run->outputs.at("Y").f[static_cast<size_t>(i)], 2.0f * static_cast<float>(i));
    EXPECT_EQ(run->outputs.at("Y").f[static_cast<size_t>(16 + i)], -static_cast<float>(i));
  }
}

// Depthwise (group = channels, MobileNetV2's) and grouped convolutions against the naive loops.
TEST(OnnxLayout, DepthwiseAndGroupedConvolutionsMatchNaiveNchw) {
  for (const int groups : {4, 2}) {
    const int n = 1, c = 4, h = 5, w = 5, f = 4, k = 3;
    const auto weights = random_values(f * (c / groups) * k * k, 7 + groups);
    const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
dw (float[N, 4, 5, 5] X) => (float[N, 4, 5, 5] Y)
<float[4, )" + std::to_string(c / groups) +
                             ", 3, 3] W = " + list(weights) + R"(>
{
  Y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = )" +
                             std::to_string(groups) + R"(> (X, W)
}
)";
    const auto x = random_values(n * c * h * w, 9);
    auto run = import_and_run(text, n, {{"X", HostTensor::from({n, c, h, w}, x)}});
    ASSERT_TRUE(run.ok()) << run.status();
    const auto ref = conv_nchw(x, weights, n, c, h, w, f, k, k, 1, 1, 1, 5, 5, groups);
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(run->outputs.at("Y").f[i], ref[i], 1e-5) << groups << " " << i;
  }
}

// AveragePool with and without count_include_pad, and a padded MaxPool whose padding never wins
// over negative values.
TEST(OnnxLayout, PoolsCountPaddingAsTheFileSays) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
pools (float[N, 1, 2, 2] X) => (float[N, 1, 2, 2] A, float[N, 1, 2, 2] B, float[N, 1, 2, 2] M)
{
  A = AveragePool <kernel_shape = [2, 2], pads = [1, 1, 0, 0], count_include_pad = 1> (X)
  B = AveragePool <kernel_shape = [2, 2], pads = [1, 1, 0, 0]> (X)
  M = MaxPool <kernel_shape = [2, 2], pads = [1, 1, 0, 0]> (X)
}
)";
  auto run = import_and_run(text, 1, {{"X", HostTensor::from({1, 1, 2, 2}, {-4, -8, -2, -6})}});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->outputs.at("A").f, ::testing::ElementsAre(-1, -3, -1.5f, -5));
  EXPECT_THAT(run->outputs.at("B").f, ::testing::ElementsAre(-4, -6, -3, -5));
  EXPECT_THAT(run->outputs.at("M").f, ::testing::ElementsAre(-4, -4, -2, -2));
}

// Dilated convolutions (DeepLab's atrous ones), computed as TensorFlow's atrous_conv2d does:
// explicit pads, SAME_UPPER, a depthwise one with unequal dilations, and an image whose size is
// no multiple of the dilation.
TEST(OnnxLayout, DilatedConvolutionsMatchNaiveNchw) {
  struct Case {
    int h, w, groups, dil_h, dil_w;
    std::string pads;  // the Conv's padding attributes
    int pad_t, pad_l, oh, ow;
  };
  const Case cases[] = {
      {9, 8, 1, 2, 2, "pads = [2, 2, 2, 2]", 2, 2, 9, 8},
      {7, 10, 1, 2, 2, "pads = [1, 0, 2, 3]", 1, 0, 6, 9},
      {9, 7, 4, 2, 3, "auto_pad = \"SAME_UPPER\"", 2, 3, 9, 7},
      {11, 9, 1, 3, 2, "", 0, 0, 5, 5},
  };
  for (const Case& t : cases) {
    const int n = 2, c = 4, f = 4, k = 3, cg = c / t.groups;
    const auto weights = random_values(f * cg * k * k, 11 + t.h);
    const std::string shape = std::to_string(t.h) + ", " + std::to_string(t.w);
    const std::string out = std::to_string(t.oh) + ", " + std::to_string(t.ow);
    const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
atrous (float[N, 4, )" + shape +
                             "] X) => (float[N, 4, " + out + R"(] Y)
<float[4, )" + std::to_string(cg) +
                             ", 3, 3] W = " + list(weights) + R"(>
{
  Y = Conv <kernel_shape = [3, 3], dilations = [)" +
                             std::to_string(t.dil_h) + ", " + std::to_string(t.dil_w) +
                             "], group = " + std::to_string(t.groups) +
                             (t.pads.empty() ? "" : ", " + t.pads) + R"(> (X, W)
}
)";
    const auto x = random_values(n * c * t.h * t.w, 13);
    auto run = import_and_run(text, n, {{"X", HostTensor::from({n, c, t.h, t.w}, x)}});
    ASSERT_TRUE(run.ok()) << t.pads << ": " << run.status();
    const auto ref = conv_nchw(x, weights, n, c, t.h, t.w, f, k, k, 1, t.pad_t, t.pad_l, t.oh, t.ow,
                               t.groups, t.dil_h, t.dil_w);
    const HostTensor& y = run->outputs.at("Y");
    ASSERT_EQ(y.shape, Shape({n, f, t.oh, t.ow})) << t.pads;
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(y.f[i], ref[i], 1e-5) << t.pads << " " << i;
    // The kernel is the file's [kh, kw, in, out] variable: no zeros inserted into it.
    EXPECT_EQ(run->imported.initial_values.at("W").shape.elements(), f * cg * k * k);
  }
}

// ceil_mode 1 (torchvision's GoogLeNet and Inception pools): the last, partial windows taken.
TEST(OnnxLayout, PoolsWithCeilModeTakeThePartialWindows) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
pools (float[N, 1, 6, 6] X) => (float[N, 1, 3, 3] M, float[N, 1, 3, 3] A, float[N, 1, 4, 4] P)
{
  M = MaxPool <kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1> (X)
  A = AveragePool <kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1> (X)
  P = MaxPool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 0, 0], ceil_mode = 1> (X)
}
)";
  std::vector<float> x(36);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -static_cast<float>(i);  // largest top left
  auto run = import_and_run(text, 1, {{"X", HostTensor::from({1, 1, 6, 6}, x)}});
  ASSERT_TRUE(run.ok()) << run.status();
  // Windows at rows and columns 0, 2, 4, the last two wide: each window's first element.
  EXPECT_THAT(run->outputs.at("M").f,
              ::testing::ElementsAre(0, -2, -4, -12, -14, -16, -24, -26, -28));
  // The means of rows 0-2, 2-4 and 4-5 (1, 3, 4.5) and the same columns: -(6 row + column).
  EXPECT_THAT(run->outputs.at("A").f,
              ::testing::ElementsAre(-7, -9, -10.5f, -19, -21, -22.5f, -28, -30, -31.5f));
  // Padded by one before: windows over rows {-1, 0}, {1, 2}, {3, 4} and the partial {5}.
  EXPECT_THAT(run->outputs.at("P").f, ::testing::ElementsAre(0, -1, -3, -5, -6, -7, -9, -11, -18,
                                                             -19, -21, -23, -30, -31, -33, -35));
}

// A dilated convolution with strides, which an atrous convolution does not take, is refused
// naming the node.
TEST(OnnxLayout, ADilatedConvolutionWithStridesIsRefused) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
atrous (float[N, 1, 9, 9] X) => (float[N, 1, 3, 3] Y)
<float[1, 1, 3, 3] W = {1, 1, 1, 1, 1, 1, 1, 1, 1}>
{
  Y = Conv <kernel_shape = [3, 3], dilations = [2, 2], strides = [2, 2]> (X, W)
}
)";
  auto run = import_and_run(text, 1, {{"X", HostTensor::zeros(DType::kF32, {1, 1, 9, 9})}});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              ::testing::HasSubstr("node 'Y' (Conv): dilations with strides other than 1"));
}

}  // namespace onnx_layout_test
}  // namespace tpusim::runtime::onnx_import
