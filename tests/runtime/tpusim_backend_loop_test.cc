// The tpusim backend's device loops: the per-op profile, optimizers and schedules over several
// steps against the cpu, and the errors of bad batches. One System per process.
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

namespace tpusim::runtime {
namespace tpusim_backend_loop_test {

using opcheck::parse_backend_spec;

// The loop's per-op profile: a [256, 512] x [512, 256] matmul does exactly 2 M K N FLOPs a step,
// the infeed lands every byte of its batch in HBM, and the ops' spans fit in the loop.
TEST(TpusimBackend, ProfilesEveryOpOfTheLoop) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {256, 512});
  const Value w = b.variable("w", DType::kF32, {512, 256}, {InitKind::kGlorotUniform});
  b.output("y", b.unary(Op::kRelu, b.matmul(x, w)));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto backend = make_backend("tpusim");
  ASSERT_TRUE(backend.ok());
  auto exe = (*backend)->compile(b.graph(), {Precision::kFp32});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Variables vars = initial_variables(b.graph());
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {256, 512}}};
  LoopStep fed;
  fed.replicas = {opcheck::make_feeds(c, 3)};
  const std::vector<LoopStep> steps(2, fed);
  auto loop = (*backend)->run_loop(**exe, vars, steps, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const DeviceTiming& t = loop->timing;
  std::map<std::string, OpTiming> by_op;
  double seconds = 0;
  for (const OpTiming& o : t.ops) {
    by_op[o.op] = o;
    seconds += o.seconds;
    EXPECT_GT(o.seconds, 0) << o.label;
    EXPECT_GT(o.instructions, 0u) << o.label;
  }
  ASSERT_EQ(by_op.count("matmul"), 1u);
  EXPECT_EQ(by_op["matmul"].flops, 2 * 2.0 * 256 * 512 * 256);
  EXPECT_EQ(by_op["matmul"].mxu_flops, by_op["matmul"].flops);
  // It reads x and w at least once and writes y.
  EXPECT_GE(by_op["matmul"].hbm_bytes, 2 * 4.0 * (256 * 512 + 512 * 256 + 256 * 256));
  EXPECT_EQ(by_op["infeed"].label, "x");
  EXPECT_EQ(by_op["infeed"].hbm_bytes, 2 * 4.0 * 256 * 512);
  EXPECT_EQ(by_op["relu"].flops, 2 * 256.0 * 256);
  EXPECT_EQ(by_op["relu"].mxu_flops, 0);
  // The spans leave out the time the infeed waited for the host link.
  const double busy = t.seconds * (1 - static_cast<double>(t.infeed_wait_cycles[0]) /
                                           static_cast<double>(t.cycles));
  EXPECT_LE(seconds, busy) << t.seconds;
  EXPECT_GT(seconds, 0.8 * busy) << t.seconds;
  // v3: 2 cores x 2 MXUs of 128 x 128 at 940 MHz; vector units of 128 lanes x 8 sublanes x 2 ALUs;
  // 900 GB/s of HBM.
  EXPECT_DOUBLE_EQ(t.roofs.peak_flops, 2.0 * 2 * 2 * 128 * 128 * 940e6);
  EXPECT_DOUBLE_EQ(t.roofs.peak_vector_flops, 2.0 * 128 * 8 * 2 * 940e6);
  EXPECT_DOUBLE_EQ(t.roofs.hbm_bytes_per_second, 900e9);
}

// Adam with a staircase exponential decay, and momentum with a piecewise schedule: slots, the
// global step, bias correction and the schedules' select/exp/cast run on the vector unit and
// follow the cpu backend.
TEST(TpusimBackend, OptimizersAndSchedulesMatchCpu) {
  for (int which = 0; which < 2; ++which) {
    GraphBuilder b;
    const Value x = b.infeed("x", DType::kF32, {16, 12});
    const Value labels = b.infeed("labels", DType::kS32, {16});
    const Value logits = layers::dense(b, x, 4, layers::Activation::kNone, 2);
    const Value loss =
        layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
    std::vector<Value> vars;
    for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
    auto grads = gradients(b, loss, vars);
    ASSERT_TRUE(grads.ok());
    OptimizerSpec spec;
    if (which == 0) {
      spec.kind = OptimizerSpec::Kind::kAdam;
      spec.learning_rate = {LearningRate::Kind::kExponentialDecay, 0.05f, 0.5f, 2, true, {}, {}};
    } else {
      spec.kind = OptimizerSpec::Kind::kMomentum;
      spec.learning_rate = {
          LearningRate::Kind::kPiecewiseConstant, 0, 1, 1, false, {1}, {0.1f, 0.02f}};
    }
    auto lr = apply_gradients(b, spec, vars, *grads);
    ASSERT_TRUE(lr.ok()) << lr.status();
    b.output("loss", loss);
    b.output("lr", *lr);
    ASSERT_TRUE(b.status().ok()) << b.status();
    opcheck::OpCase c;
    c.inputs = {{"x", DType::kF32, {16, 12}}, {"labels", DType::kS32, {16}, 0, 4}};
    const std::vector<Feeds> feeds(4, opcheck::make_feeds(c, 3));
    Variables on_cpu = initial_variables(b.graph()), on_tpu = on_cpu;
    for (auto [name, vars_ptr] : {std::pair{"cpu", &on_cpu}, std::pair{"tpusim", &on_tpu}}) {
      auto backend = make_backend(name);
      auto exe = (*backend)->compile(
          b.graph(), {name == std::string("cpu") ? Precision::kMxu : Precision::kFp32});
      ASSERT_TRUE(exe.ok()) << exe.status();
      auto out = (*backend)->run(**exe, *vars_ptr, feeds, 0);
      ASSERT_TRUE(out.ok()) << out.status();
      if (which == 0) {
        EXPECT_NEAR((*out)[3].at("lr").f[0], 0.05f * 0.5f, 1e-7) << name;
      } else {
        EXPECT_EQ((*out)[3].at("lr").f[0], 0.02f) << name;
      }
    }
    for (const auto& [name, value] : on_cpu) {
      for (size_t i = 0; i < value.f.size(); ++i)
        ASSERT_NEAR(on_tpu[name].f[i], value.f[i], 1e-4) << name << " [" << i << "]";
    }
    EXPECT_EQ(on_tpu.at("global_step").f[0], 4.0f);
  }
}

TEST(TpusimBackend, BadBatchesAreNamed) {
  GraphBuilder b;
  b.output("y", b.infeed("x", DType::kF32, {2, 3}) * 2.0f);
  auto backend = make_backend("tpusim");
  auto exe = (*backend)->compile(b.graph(), {});
  ASSERT_TRUE(exe.ok());
  Variables vars;
  auto out = (*backend)->run(**exe, vars, {{{"x", HostTensor::zeros(DType::kF32, {3, 3})}}}, 0);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::HasSubstr("infeed 'x' takes f32[2, 3]; the batch is f32[3, 3]"));
}

}  // namespace tpusim_backend_loop_test
}  // namespace tpusim::runtime
