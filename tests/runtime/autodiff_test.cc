// Reverse-mode gradients of every differentiable op case against central finite differences on
// the cpu backend (fp32).
#include "runtime/graph/autodiff.h"

#include <cmath>

#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime {
namespace opcheck {
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.op << " " << c.shape; }
}  // namespace opcheck

namespace {

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

}  // namespace
}  // namespace tpusim::runtime
