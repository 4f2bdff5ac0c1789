// ONNX graphs imported and run on the cpu backend: each op family against values computed here
// (naive loops), and initializers becoming variables or constants as the importer promises.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/onnx/onnx_test_util.h"

namespace tpusim::runtime::onnx_import {
namespace onnx_import_test {

using testing::count_ops;
using ::testing::ElementsAre;
using testing::import_and_run;

// Gemm (transB, alpha, beta), Relu and Softmax: B and C become variables holding the file's
// values, laid out [K, N]; the output matches the formula.
TEST(OnnxImport, GemmReluSoftmaxMatchTheFormula) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
mlp (float[N, 2] X) => (float[N, 3] Y)
<float[3, 2] W = {1, -2, 0.5, 3, -1, 1}, float[3] B = {0.5, 0, -1}>
{
  H = Gemm <transB = 1, alpha = 2.0, beta = 0.5> (X, W, B)
  R = Relu (H)
  Y = Softmax <axis = 1> (R)
}
)";
  const HostTensor x = HostTensor::from({2, 2}, {0.25f, -1.0f, 2.0f, 0.5f});
  auto run = import_and_run(text, 2, {{"X", x}});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->imported.initial_values.count("W"), 1u);
  EXPECT_EQ(run->imported.initial_values.at("W").shape, Shape({2, 3}));  // transposed to [K, N]
  EXPECT_THAT(run->imported.initial_values.at("W").f, ElementsAre(1, 0.5f, -1, -2, 3, 1));
  const float w[3][2] = {{1, -2}, {0.5f, 3}, {-1, 1}};
  const float bias[3] = {0.5f, 0, -1};
  const HostTensor& y = run->outputs.at("Y");
  ASSERT_EQ(y.shape, Shape({2, 3}));
  for (int n = 0; n < 2; ++n) {
    double r[3], total = 0;
    for (int j = 0; j < 3; ++j) {
      const double h = 2.0 * (x.f[n * 2] * w[j][0] + x.f[n * 2 + 1] * w[j][1]) + 0.5 * bias[j];
      r[j] = std::exp(std::max(0.0, h));
      total += r[j];
    }
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(y.f[n * 3 + j], r[j] / total, 1e-6) << n << " " << j;
  }
}

// Under mixed_bfloat16 (ImportOptions::compute kBF16) the weights stay f32 variables read
// through casts, the scale constant meets the bf16 products cast, and the result is the f32
// one within bf16's rounding.
TEST(OnnxImport, MixedBfloat16ReadsF32WeightsAsBf16) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
mlp (float[N, 2] X) => (float[N, 3] Y)
<float[2, 3] W = {1, -2, 0.5, 3, -1, 1}, float scale = {0.5}>
{
  H = MatMul (X, W)
  S = Mul (H, scale)
  Y = Relu (S)
}
)";
  const HostTensor x = HostTensor::from({2, 2}, {0.25f, -1.0f, 2.0f, 0.5f});
  auto full = import_and_run(text, 2, {{"X", x}});
  auto mixed = import_and_run(text, 2, {{"X", x}}, false, DType::kBF16);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->imported.initial_values.at("W").dtype, DType::kF32);
  int f32_variables = 0;
  for (const Node& n : mixed->graph.nodes())
    f32_variables += n.op == Op::kVariable && n.dtype == DType::kF32;
  EXPECT_EQ(f32_variables, 1);
  EXPECT_GE(count_ops(mixed->graph, Op::kCast), 3);  // the input, W, the scale (and the output)
  for (size_t i = 0; i < 6; ++i)
    EXPECT_NEAR(mixed->outputs.at("Y").f[i], full->outputs.at("Y").f[i], 2e-2) << i;
}

// PyTorch's flatten as exported: Shape, Gather, Unsqueeze, Concat and Reshape fold at import
// time; the device sees one reshape, and MatMul with a broadcast bias Add follows.
TEST(OnnxImport, ShapeArithmeticFoldsAtImportTime) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
flat (float[N, 2, 3] X) => (float[N, 2] Y)
<float[6, 2] W = {1, 0, 0, 1, 1, 0, 0, 1, 1, 1, -1, 2}, float[2] B = {10, 20}, int64[1] minus_one = {-1}>
{
  S = Shape (X)
  zero = Constant <value = int64 {0}> ()
  D = Gather <axis = 0> (S, zero)
  zero_axes = Constant <value = int64[1] {0}> ()
  U = Unsqueeze (D, zero_axes)
  C = Concat <axis = 0> (U, minus_one)
  F = Reshape (X, C)
  M = MatMul (F, W)
  Y = Add (M, B)
}
)";
  const HostTensor x = HostTensor::from({2, 2, 3}, {1, 2, 3, 4, 5, 6, -1, 0, 1, 0, 2, 0});
  auto run = import_and_run(text, 2, {{"X", x}});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(count_ops(run->graph, Op::kReshape), 1);
  EXPECT_EQ(count_ops(run->graph, Op::kConstant), 0);
  const float w[6][2] = {{1, 0}, {0, 1}, {1, 0}, {0, 1}, {1, 1}, {-1, 2}};
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 2; ++j) {
      double v = j == 0 ? 10 : 20;
      for (int k = 0; k < 6; ++k) v += x.f[n * 6 + k] * w[k][j];
      EXPECT_FLOAT_EQ(run->outputs.at("Y").f[n * 2 + j], static_cast<float>(v));
    }
  }
  // W and B feed weights; the int64 shape constant stays a constant.
  EXPECT_EQ(run->imported.initial_values.count("W"), 1u);
  EXPECT_EQ(run->imported.initial_values.count("B"), 1u);
  EXPECT_EQ(run->imported.initial_values.count("minus_one"), 0u);
}

// BERT's GELU as tf2onnx and torch.onnx export it (Div, Erf, Add, Mul, Mul by 0.5), and
// LayerNormalization (opset 17) with its scale and bias.
TEST(OnnxImport, GeluAndLayerNormalizationMatchTheFormula) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 17]>
gelu (float[N, 4] X) => (float[N, 4] Y)
<float[4] G = {1, 2, 0.5, 1}, float[4] Be = {0, 0.25, 0, -1}>
{
  sqrt2 = Constant <value = float {1.4142135}> ()
  one = Constant <value = float {1.0}> ()
  half = Constant <value = float {0.5}> ()
  D = Div (X, sqrt2)
  E = Erf (D)
  P = Add (E, one)
  M = Mul (X, P)
  H = Mul (M, half)
  Y = LayerNormalization <epsilon = 0.001> (H, G, Be)
}
)";
  const HostTensor x = HostTensor::from({1, 4}, {-1.5f, 0.25f, 1.0f, 3.0f});
  auto run = import_and_run(text, 1, {{"X", x}});
  ASSERT_TRUE(run.ok()) << run.status();
  double h[4], mean = 0, var = 0;
  for (int i = 0; i < 4; ++i) {
    h[i] = x.f[i] * 0.5 * (1 + std::erf(x.f[i] / std::sqrt(2.0)));
    mean += h[i] / 4;
  }
  for (double v : h) var += (v - mean) * (v - mean) / 4;
  const double g[4] = {1, 2, 0.5, 1}, be[4] = {0, 0.25, 0, -1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(run->outputs.at("Y").f[i], (h[i] - mean) / std::sqrt(var + 0.001) * g[i] + be[i],
                2e-6);
  }
}

// Gather of an embedding table by ids computed on the device: the table is a variable and the
// lookup the IR's gather; Where, Equal and Cast on the way.
TEST(OnnxImport, EmbeddingLookupsAreGathersOfAVariable) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
embed (int64[N, 3] ids) => (float[N, 3, 2] Y)
<float[4, 2] table = {0, 1, 10, 11, 20, 21, 30, 31}, int64 pad = {0}, int64 unk = {3}>
{
  is_pad = Equal (ids, pad)
  fixed = Where (is_pad, unk, ids)
  Y = Gather (table, fixed)
}
)";
  HostTensor ids;
  ids.dtype = DType::kS32;
  ids.shape = Shape({2, 3});
  ids.i = {1, 0, 2, 3, 3, 0};
  auto run = import_and_run(text, 2, {{"ids", ids}});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(count_ops(run->graph, Op::kGather), 1);
  ASSERT_EQ(run->imported.initial_values.count("table"), 1u);
  EXPECT_THAT(run->outputs.at("Y").f, ElementsAre(10, 11, 30, 31, 20, 21, 30, 31, 30, 31, 30, 31));
}

// BatchNormalization in inference uses the file's statistics; in training the batch's, and its
// moving statistics are variables named as graph.h's is_statistic knows them.
TEST(OnnxImport, BatchNormalizationInInferenceAndTraining) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
bn (float[N, 2] X) => (float[N, 2] Y)
<float[2] s = {2, 1}, float[2] b = {1, 0}, float[2] m = {0.5, -1}, float[2] v = {4, 1}>
{
  Y = BatchNormalization <epsilon = 0.0, momentum = 0.9> (X, s, b, m, v)
}
)";
  const HostTensor x = HostTensor::from({2, 2}, {1.5f, 0.0f, -0.5f, 2.0f});
  auto inference = import_and_run(text, 2, {{"X", x}});
  ASSERT_TRUE(inference.ok()) << inference.status();
  EXPECT_THAT(inference->outputs.at("Y").f, ElementsAre(2.0f, 1.0f, 0.0f, 3.0f));
  EXPECT_THAT(inference->imported.statistics, ElementsAre("m/moving_mean", "v/moving_variance"));
  EXPECT_TRUE(is_statistic("m/moving_mean"));
  auto training = import_and_run(text, 2, {{"X", x}}, /*training=*/true);
  ASSERT_TRUE(training.ok()) << training.status();
  // Batch statistics: means (0.5, 1), variances (1, 1): normalised to -1 and 1.
  EXPECT_THAT(training->outputs.at("Y").f, ElementsAre(3.0f, -1.0f, -1.0f, 1.0f));
}

// Pow with the exponents XLA expands, Sqrt, Reciprocal, Clip (ReLU6) and a folded Pow of
// constants.
TEST(OnnxImport, PowersRootsAndClipsMatchTheFormula) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
pw (float[N, 3] X) => (float[N, 3] A, float[N, 3] B, float[N, 3] C)
<float two = {2}, float three = {3}, float lo = {0}, float hi = {6}>
{
  nine = Pow (three, two)
  sq = Pow (X, two)
  A = Add (sq, nine)
  r = Sqrt (A)
  B = Reciprocal (r)
  C = Clip (X, lo, hi)
}
)";
  const HostTensor x = HostTensor::from({1, 3}, {-2.0f, 1.0f, 7.0f});
  auto run = import_and_run(text, 1, {{"X", x}});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->outputs.at("A").f, ElementsAre(13, 10, 58));
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(run->outputs.at("B").f[i], 1 / std::sqrt(run->outputs.at("A").f[i]), 1e-7);
  EXPECT_THAT(run->outputs.at("C").f, ElementsAre(0, 1, 6));
}

// Every op of the importer's set that the issue names is there, and only supported ones are
// listed.
TEST(OnnxImport, SupportsTheNamedOps) {
  const std::vector<std::string> ops = supported_ops();
  for (const char* op : {"Conv",
                         "BatchNormalization",
                         "Relu",
                         "Clip",
                         "Sigmoid",
                         "Tanh",
                         "Erf",
                         "Softmax",
                         "LogSoftmax",
                         "MaxPool",
                         "AveragePool",
                         "GlobalAveragePool",
                         "Gemm",
                         "MatMul",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Pow",
                         "Sqrt",
                         "Reciprocal",
                         "Neg",
                         "Exp",
                         "Log",
                         "ReduceMean",
                         "ReduceSum",
                         "ReduceMax",
                         "Reshape",
                         "Flatten",
                         "Transpose",
                         "Squeeze",
                         "Unsqueeze",
                         "Concat",
                         "Split",
                         "Slice",
                         "Gather",
                         "Shape",
                         "Constant",
                         "ConstantOfShape",
                         "Cast",
                         "Expand",
                         "Where",
                         "Equal",
                         "LayerNormalization",
                         "Dropout",
                         "Identity",
                         "Pad"}) {
    EXPECT_THAT(ops, ::testing::Contains(std::string(op)));
  }
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
}

}  // namespace onnx_import_test
}  // namespace tpusim::runtime::onnx_import
