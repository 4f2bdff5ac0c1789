// The zoo under the mixed_bfloat16 dtype policy: what runs in bf16 and what stays f32, and a
// training step on the cpu that learns what the float32 policy learns, to bf16's precision.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "runtime/models/zoo.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime::models {
namespace zoo_mixed_precision_test {

Graph training_step(const std::string& model, DTypePolicy policy) {
  GraphBuilder b;
  const absl::Status s = build_training_step(b, model, 8, 0.1f, 1, policy);
  EXPECT_TRUE(s.ok()) << model << ": " << s;
  return b.graph();
}

class ZooMixedPrecision : public ::testing::TestWithParam<std::string> {};

// Variables (and so checkpoints) are the float32 policy's, all f32; every matmul (dense layers,
// convolutions, their gradients) takes bf16 operands; the loss is f32.
TEST_P(ZooMixedPrecision, ComputesInBf16AndKeepsVariablesAndLossInF32) {
  const Graph mixed = training_step(GetParam(), DTypePolicy::kMixedBFloat16);
  const Graph full = training_step(GetParam(), DTypePolicy::kFloat32);
  std::set<std::string> mixed_vars, full_vars;
  for (int id : mixed.variables()) {
    EXPECT_EQ(mixed.node(id).dtype, DType::kF32) << mixed.node(id).attrs.name;
    mixed_vars.insert(mixed.node(id).attrs.name + mixed.node(id).shape.str());
  }
  for (int id : full.variables())
    full_vars.insert(full.node(id).attrs.name + full.node(id).shape.str());
  EXPECT_EQ(mixed_vars, full_vars);
  int matmuls = 0;
  for (const Node& n : mixed.nodes()) {
    if (n.op != Op::kMatMul) continue;
    ++matmuls;
    for (int in : n.inputs) EXPECT_EQ(mixed.node(in).dtype, DType::kBF16) << n.label;
  }
  EXPECT_GT(matmuls, 3);
  for (const NamedValue& out : mixed.outputs()) EXPECT_EQ(mixed.node(out.node).dtype, DType::kF32);
}

// One SGD step on the cpu from the same weights and batch: the loss is the float32 policy's to
// bf16's precision (activations rounded to 8 bits: within 2%), yet not bit for bit.
TEST_P(ZooMixedPrecision, TrainsOnTheCpuLikeFloat32ToBf16Precision) {
  const Graph mixed = training_step(GetParam(), DTypePolicy::kMixedBFloat16);
  const Graph full = training_step(GetParam(), DTypePolicy::kFloat32);
  opcheck::OpCase c;
  c.inputs = {{"image", DType::kF32, {8, 28, 28, 1}, 0, 1}, {"label", DType::kS32, {8}, 0, 10}};
  const std::vector<Feeds> feeds = {opcheck::make_feeds(c, 7)};
  auto loss_of = [&](const Graph& g) {
    auto backend = make_backend("cpu");
    auto exe = (*backend)->compile(g, {Precision::kFp32});
    EXPECT_TRUE(exe.ok()) << exe.status();
    Variables v = initial_variables(g);
    auto out = (*backend)->run(**exe, v, feeds, 0);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].at("loss").f[0] : NAN;
  };
  const float mixed_loss = loss_of(mixed), full_loss = loss_of(full);
  ASSERT_TRUE(std::isfinite(mixed_loss));
  EXPECT_NEAR(mixed_loss, full_loss, 0.02 * full_loss);
  EXPECT_NE(mixed_loss, full_loss);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooMixedPrecision,
                         ::testing::Values("mlp", "mnist_cnn", "resnet_small", "image_cnn",
                                           "transformer"),
                         [](const auto& p) { return p.param; });

TEST(DTypePolicy, ParsesKerasNames) {
  EXPECT_EQ(*parse_dtype_policy("float32"), DTypePolicy::kFloat32);
  EXPECT_EQ(*parse_dtype_policy("mixed_bfloat16"), DTypePolicy::kMixedBFloat16);
  EXPECT_STREQ(dtype_policy_name(DTypePolicy::kMixedBFloat16), "mixed_bfloat16");
  const auto bad = parse_dtype_policy("mixed_float16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown dtype policy 'mixed_float16' (float32 or mixed_bfloat16)");
}

}  // namespace zoo_mixed_precision_test
}  // namespace tpusim::runtime::models
