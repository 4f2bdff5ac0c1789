// Reverse-mode gradients of every differentiable op case against central finite differences on
// the cpu backend (fp32).
#include "runtime/graph/autodiff.h"

#include <cmath>

#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime {
namespace opcheck {
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.op << " " << c.shape; }
}  // namespace opcheck

namespace autodiff_test {

using opcheck::OpCase;

class FiniteDifferences : public ::testing::TestWithParam<OpCase> {};

TEST_P(FiniteDifferences, GradientsMatch) {
  const OpCase& c = GetParam();
  auto graph = opcheck::build_case_graph(c, 3, /*with_loss=*/true);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto backend = make_backend("cpu");
  ASSERT_TRUE(backend.ok());
  auto exe = (*backend)->compile(*graph, {});
  ASSERT_TRUE(exe.ok());
  Feeds feeds = opcheck::make_feeds(c, 3);
  Variables vars = initial_variables(*graph);
  auto eval = [&](const Feeds& f, Variables v) {
    auto out = (*backend)->run(**exe, v, {f}, 0);
    EXPECT_TRUE(out.ok()) << out.status();
    return (*out)[0];
  };
  const Outputs base = eval(feeds, vars);
  auto loss_of = [&](const Feeds& f, const Variables& v) {
    return static_cast<double>(eval(f, v).at("loss").f[0]);
  };

  // Every floating input and variable: up to 10 elements spread over the tensor.
  std::vector<std::string> names;
  for (const auto& in : c.inputs) {
    if (is_floating(in.dtype)) names.push_back(in.name);
  }
  for (const auto& [name, value] : vars) names.push_back(name);
  for (const std::string& name : names) {
    const HostTensor& grad = base.at("grad(" + name + ")");
    double scale = 1e-3;
    for (float g : grad.f) scale = std::max(scale, static_cast<double>(std::abs(g)));
    const bool is_input = feeds.count(name) > 0;
    const size_t n = grad.f.size();
    for (size_t k = 0; k < std::min<size_t>(n, 10); ++k) {
      const size_t i = k * n / std::min<size_t>(n, 10);
      const float h = 1e-3f;
      Feeds fp = feeds, fm = feeds;
      Variables vp = vars, vm = vars;
      (is_input ? fp.at(name).f : vp.at(name).f)[i] += h;
      (is_input ? fm.at(name).f : vm.at(name).f)[i] -= h;
      const double numeric = (loss_of(fp, vp) - loss_of(fm, vm)) / (2.0 * h);
      EXPECT_NEAR(grad.f[i], numeric, 1e-2 * scale + 2e-3)
          << c.op << " " << c.shape << ": d loss / d " << name << "[" << i << "]";
    }
  }
}

// The f32 cases: a finite difference of a bf16 computation is mostly its rounding steps.
std::vector<OpCase> differentiable_cases() {
  std::vector<OpCase> out;
  for (auto& c : opcheck::all_cases()) {
    if (c.differentiable && !c.bf16) out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, FiniteDifferences, ::testing::ValuesIn(differentiable_cases()),
                         [](const auto& param_info) {
                           std::string name =
                               param_info.param.op + "_" + std::to_string(param_info.index);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(Autodiff, UnusedValuesGetZeroGradients) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {3});
  const Value unused = b.infeed("u", DType::kF32, {2, 2});
  const Value loss = b.reduce(Op::kReduceSum, b.unary(Op::kSquare, x), {0});
  auto grads = gradients(b, loss, {x, unused});
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("gu", (*grads)[1]);
  b.output("gx", (*grads)[0]);
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {});
  Variables vars;
  auto out = (*backend)->run(
      **exe, vars,
      {{{"x", HostTensor::from({3}, {1, -2, 3})}, {"u", HostTensor::zeros(DType::kF32, {2, 2})}}},
      0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].at("gx").f, (std::vector<float>{2, -4, 6}));
  EXPECT_EQ((*out)[0].at("gu").f, (std::vector<float>{0, 0, 0, 0}));
}

// TensorFlow's ReluGrad masks with the output (relu(x) > 0 exactly where x > 0), so a training
// step need not keep the relu's input for the backward pass.
TEST(Autodiff, ReluGradientMasksWithTheOutput) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4});
  const Value y = b.unary(Op::kRelu, x + 0.0f);
  auto grads = gradients(b, b.reduce(Op::kReduceSum, y * y, {0}), {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  int masks = 0;
  for (const Node& n : b.graph().nodes()) {
    if (n.op != Op::kGreater) continue;
    ++masks;
    EXPECT_EQ(n.inputs[0], y.id);
  }
  EXPECT_EQ(masks, 1);
  b.output("gx", (*grads)[0]);
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {});
  Variables vars;
  auto out = (*backend)->run(**exe, vars, {{{"x", HostTensor::from({4}, {1, -2, 0, 3})}}}, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].at("gx").f, (std::vector<float>{2, 0, 0, 6}));
}

// tf.nn.softmax is one op whose registered gradient, _SoftmaxGrad, reads only its output: the
// backward pass reads neither the exponentials nor their sums, so a training step need not keep
// them (an attention layer's [batch, heads, seq, seq] exponentials in f32 would be the largest
// values it holds). In bf16 the gradient reads the bf16 output, as TensorFlow's does.
TEST(Autodiff, SoftmaxGradientReadsOnlyItsOutput) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    GraphBuilder b;
    const Value x = b.infeed("x", DType::kF32, {2, 3});
    const Value logits = dtype == DType::kF32 ? x + 0.0f : b.cast(x, dtype);
    const int forward_end = b.graph().size();
    const Value y = layers::softmax(logits);
    const int softmax_end = b.graph().size();
    const Value weights = b.cast(b.constant(HostTensor::from({3}, {1, 2, 4})), dtype);
    auto grads =
        gradients(b, b.cast(b.reduce(Op::kReduceSum, y * weights, {0, 1}), DType::kF32), {x});
    ASSERT_TRUE(grads.ok()) << grads.status();
    EXPECT_EQ(y.dtype(), dtype);
    for (int id = softmax_end; id < b.graph().size(); ++id) {
      for (int in : b.graph().node(id).inputs) {
        // Of the softmax's own nodes, the backward pass reads the output alone.
        if (in >= forward_end && in < softmax_end) {
          EXPECT_EQ(in, y.id) << b.graph().node(id).label;
        }
      }
    }
    b.output("gx", (*grads)[0]);
    b.output("y", b.cast(y, DType::kF32));
    auto backend = make_backend("cpu");
    auto exe = (*backend)->compile(b.graph(), {});
    ASSERT_TRUE(exe.ok()) << exe.status();
    Variables vars;
    auto out =
        (*backend)->run(**exe, vars, {{{"x", HostTensor::from({2, 3}, {1, 2, 3, 0, 0, 0})}}}, 0);
    ASSERT_TRUE(out.ok()) << out.status();
    // d/dx_j sum_i w_i y_i = y_j (w_j - sum_i w_i y_i), from the outputs as computed.
    const std::vector<float>& p = (*out)[0].at("y").f;
    const std::vector<float>& g = (*out)[0].at("gx").f;
    const float w[3] = {1, 2, 4};
    const double tolerance = dtype == DType::kF32 ? 1e-6 : 2e-2;
    for (int r = 0; r < 2; ++r) {
      double mean = 0;
      for (int j = 0; j < 3; ++j) mean += w[j] * p[static_cast<size_t>(r * 3 + j)];
      for (int j = 0; j < 3; ++j) {
        const auto k = static_cast<size_t>(r * 3 + j);
        EXPECT_NEAR(g[k], p[k] * (w[j] - mean), tolerance) << dtype_name(dtype) << " " << k;
      }
    }
  }
}

// Batch norm in training differentiates as TensorFlow's FusedBatchNormGrad (XLA's BatchNormGrad
// expansion): its backward pass reads x, gamma and the batch's mean and variance, none of the
// normalisation's intermediate values, and its gradients are the closed form's.
TEST(Autodiff, BatchNormGradientIsFusedBatchNormGrads) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4, 2});
  const int forward_end = b.graph().size();
  const Value y = layers::batch_normalization(b, x, true, 0.5f, 1e-3f);
  const int batch_norm_end = b.graph().size();
  const GraphBuilder::Composite* rule = b.composite_gradient(y.id);
  ASSERT_NE(rule, nullptr);
  ASSERT_EQ(rule->inputs.size(), 3u);
  ASSERT_EQ(rule->saved.size(), 2u);
  const Value gamma{rule->inputs[1], &b}, beta{rule->inputs[2], &b};
  const std::vector<float> w = {1, -2, 3, 0.5f, -1, 4, 2, -3};
  const Value weights = b.constant(HostTensor::from({4, 2}, w));
  auto grads = gradients(b, b.reduce(Op::kReduceSum, y * weights, {0, 1}), {x, gamma, beta});
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (int id = batch_norm_end; id < b.graph().size(); ++id) {
    for (int in : b.graph().node(id).inputs) {
      if (in < forward_end || in >= batch_norm_end || in == y.id) continue;  // y: the loss's
      EXPECT_TRUE(in == rule->inputs[1] || in == rule->saved[0] || in == rule->saved[1])
          << b.graph().node(id).label << " reads " << b.graph().node(in).label;
    }
  }
  b.output("gx", (*grads)[0]);
  b.output("ggamma", (*grads)[1]);
  b.output("gbeta", (*grads)[2]);
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Variables vars = initial_variables(b.graph());
  const std::vector<float> xs = {1, 10, 2, 20, 3, 30, 4, 45};
  auto out = (*backend)->run(**exe, vars, {{{"x", HostTensor::from({4, 2}, xs)}}}, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  // gamma 1: dx = rstd / N (N g - sum g - xc sum(g xc) / (var + eps)), dgamma = sum(g xc) rstd,
  // dbeta = sum g, per column, in double.
  for (int c = 0; c < 2; ++c) {
    double mean = 0, var = 0, sum_g = 0, sum_gxc = 0;
    for (int r = 0; r < 4; ++r) mean += xs[static_cast<size_t>(r * 2 + c)] / 4.0;
    for (int r = 0; r < 4; ++r) {
      const double xc = xs[static_cast<size_t>(r * 2 + c)] - mean;
      var += xc * xc / 4;
      sum_g += w[static_cast<size_t>(r * 2 + c)];
      sum_gxc += w[static_cast<size_t>(r * 2 + c)] * xc;
    }
    const double rstd = 1 / std::sqrt(var + 1e-3);
    EXPECT_NEAR((*out)[0].at("gbeta").f[static_cast<size_t>(c)], sum_g, 1e-5);
    EXPECT_NEAR((*out)[0].at("ggamma").f[static_cast<size_t>(c)], sum_gxc * rstd, 1e-4);
    for (int r = 0; r < 4; ++r) {
      const auto k = static_cast<size_t>(r * 2 + c);
      const double xc = xs[k] - mean;
      const double dx = rstd / 4 * (4 * w[k] - sum_g - xc * sum_gxc / (var + 1e-3));
      EXPECT_NEAR((*out)[0].at("gx").f[k], dx, 1e-4 * (1 + std::abs(dx))) << c << " " << r;
    }
  }
}

TEST(Autodiff, LossMustBeAFloatingScalar) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {3});
  auto grads = gradients(b, x, {x});
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(
      std::string(grads.status().message()).find("the loss must be a floating scalar, got f32[3]"),
      std::string::npos);
}

// Ties split the gradient equally, as JAX does.
TEST(Autodiff, ReduceMaxTiesShareTheGradient) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4});
  auto grads = gradients(b, b.reduce(Op::kReduceMax, x, {0}), {x});
  ASSERT_TRUE(grads.ok());
  b.output("g", (*grads)[0]);
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {});
  Variables vars;
  auto out = (*backend)->run(**exe, vars, {{{"x", HostTensor::from({4}, {3, 1, 3, 2})}}}, 0);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].at("g").f, (std::vector<float>{0.5f, 0, 0.5f, 0}));
}

}  // namespace autodiff_test
}  // namespace tpusim::runtime
