// Optimizers and learning-rate schedules against TensorFlow 1's formulas, written out in the
// test step by step in f32; every slot's name; bad schedules refused.
#include "runtime/graph/optimizers.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"

namespace tpusim::runtime {
namespace optimizers_test {

using ::testing::HasSubstr;

const std::vector<float> kTarget = {0.5f, -1.5f, 2.0f, 0.0f};
const std::vector<float> kStart = {1.0f, 1.0f, -1.0f, 0.0f};

// loss = sum((w - target)^2): gradient 2 (w - target); w[3] starts at its target, so its
// gradient is 0 (Adam's sqrt(0) must not be NaN).
struct Trained {
  std::vector<std::vector<float>> w;  // after each step
  std::vector<float> lr;              // each step's learning rate
  Variables vars;
};

Trained train(const OptimizerSpec& spec, int steps) {
  GraphBuilder b;
  Initializer init;
  const Value w = b.variable("w", DType::kF32, {4}, init);
  const Value diff = w - b.constant(HostTensor::from({4}, kTarget));
  const Value loss = layers::reduce_mean(diff * diff, {0}) * 4.0f;
  auto grads = gradients(b, loss, {w});
  EXPECT_TRUE(grads.ok());
  auto lr = apply_gradients(b, spec, {w}, *grads);
  EXPECT_TRUE(lr.ok()) << lr.status();
  b.output("lr", *lr);
  EXPECT_TRUE(b.status().ok()) << b.status();
  std::unique_ptr<Backend> backend = make_cpu_backend();  // no registry: no SystemC
  auto exe = backend->compile(b.graph(), {});
  Trained run;
  run.vars = initial_variables(b.graph());
  run.vars["w"] = HostTensor::from({4}, kStart);
  for (int s = 0; s < steps; ++s) {
    auto out = backend->run(**exe, run.vars, {Feeds{}}, static_cast<uint64_t>(s));
    EXPECT_TRUE(out.ok()) << out.status();
    run.lr.push_back((*out)[0].at("lr").f[0]);
    run.w.push_back(run.vars.at("w").f);
  }
  return run;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, int step) {
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::abs(want[i])))
        << "step " << step << " [" << i << "]";
    EXPECT_FALSE(std::isnan(got[i]));
  }
}

TEST(Optimizers, SgdMomentumAndNesterovFollowTheFormulas) {
  for (int kind = 0; kind < 3; ++kind) {
    OptimizerSpec spec;
    spec.kind = kind == 0 ? OptimizerSpec::Kind::kSgd : OptimizerSpec::Kind::kMomentum;
    spec.nesterov = kind == 2;
    spec.learning_rate.initial = 0.1f;
    const Trained run = train(spec, 5);
    std::vector<float> w = kStart, a(4, 0.0f);
    for (int s = 0; s < 5; ++s) {
      for (size_t i = 0; i < 4; ++i) {
        const float g = 2 * (w[i] - kTarget[i]);
        if (kind == 0) {
          w[i] -= 0.1f * g;
        } else {
          a[i] = 0.9f * a[i] + g;
          w[i] -= 0.1f * (kind == 2 ? g + 0.9f * a[i] : a[i]);
        }
      }
      expect_close(run.w[static_cast<size_t>(s)], w, s);
    }
    EXPECT_EQ(run.vars.count("w/Momentum"), kind == 0 ? 0u : 1u);
    EXPECT_EQ(run.vars.at("global_step").f[0], 5.0f);
  }
}

TEST(Optimizers, AdamFollowsTheFormulaWithBiasCorrection) {
  OptimizerSpec spec;
  spec.kind = OptimizerSpec::Kind::kAdam;
  spec.learning_rate.initial = 0.01f;
  const Trained run = train(spec, 6);
  std::vector<float> w = kStart, m(4, 0.0f), v(4, 0.0f);
  for (int s = 0; s < 6; ++s) {
    const float t = static_cast<float>(s + 1);
    const float lr_t = 0.01f * std::sqrt(1 - std::pow(0.999f, t)) / (1 - std::pow(0.9f, t));
    for (size_t i = 0; i < 4; ++i) {
      const float g = 2 * (w[i] - kTarget[i]);
      m[i] = 0.9f * m[i] + 0.1f * g;
      v[i] = 0.999f * v[i] + 0.001f * g * g;
      w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-8f);
    }
    expect_close(run.w[static_cast<size_t>(s)], w, s);
  }
  for (const char* slot : {"w/Adam", "w/Adam_1", "beta1_power", "beta2_power", "global_step"})
    EXPECT_EQ(run.vars.count(slot), 1u) << slot;
  EXPECT_NEAR(run.vars.at("beta1_power").f[0], std::pow(0.9f, 7), 1e-6);
  EXPECT_EQ(run.w.back()[3], 0.0f);  // zero gradient: no move, no NaN
}

// LAMB as BERT's MLPerf reference writes it (optimizers.h), step by step in double: the trust
// ratio ||w|| / ||u|| scales the decayed, bias-corrected Adam direction.
std::vector<std::vector<float>> lamb_by_hand(float weight_decay, int steps) {
  std::vector<double> w(kStart.begin(), kStart.end()), m(4, 0.0), v(4, 0.0);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    const double t = s + 1;
    std::vector<double> u(4);
    double w_norm = 0, u_norm = 0;
    for (size_t i = 0; i < 4; ++i) {
      const double g = 2 * (w[i] - kTarget[i]);
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      u[i] = (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-6) +
             weight_decay * w[i];
      w_norm += w[i] * w[i];
      u_norm += u[i] * u[i];
    }
    const double ratio = w_norm > 0 && u_norm > 0 ? std::sqrt(w_norm / u_norm) : 1.0;
    for (size_t i = 0; i < 4; ++i) w[i] -= 0.01 * ratio * u[i];
    out.emplace_back(w.begin(), w.end());
  }
  return out;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, int step) {
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-5f * (1 + std::abs(want[i])))
        << "step " << step << " [" << i << "]";
}

TEST(Optimizers, LambFollowsTheFormulaWithTrustRatioAndWeightDecay) {
  OptimizerSpec spec = optimizer_defaults(OptimizerSpec::Kind::kLamb);
  spec.learning_rate.initial = 0.01f;
  EXPECT_EQ(spec.epsilon, 1e-6f);
  const Trained run = train(spec, 6);
  const auto want = lamb_by_hand(0.01f, 6);
  for (int s = 0; s < 6; ++s)
    expect_near_all(run.w[static_cast<size_t>(s)], want[static_cast<size_t>(s)], s);
  for (const char* slot : {"w/lamb_m", "w/lamb_v", "global_step"})
    EXPECT_EQ(run.vars.count(slot), 1u) << slot;
  // A name holding an excluded part takes no weight decay, as BERT's layer norms and biases.
  spec.exclude_from_weight_decay = {"w"};
  const Trained undecayed = train(spec, 3);
  const auto plain = lamb_by_hand(0.0f, 3);
  for (int s = 0; s < 3; ++s)
    expect_near_all(undecayed.w[static_cast<size_t>(s)], plain[static_cast<size_t>(s)], s);
  EXPECT_NE(undecayed.w[2], run.w[2]);
}

// tf.clip_by_global_norm: the step's gradients (2 (w - target): norm 2 sqrt(0.25 + 6.25 + 9) =
// 7.87) scaled to norm 0.5; a norm under the clip passes unchanged.
TEST(Optimizers, ClipByGlobalNormScalesTheGradients) {
  OptimizerSpec spec;
  spec.learning_rate.initial = 0.1f;
  spec.clip_global_norm = 0.5f;
  const Trained run = train(spec, 1);
  double norm = 0;
  for (size_t i = 0; i < 4; ++i) norm += 4.0 * (kStart[i] - kTarget[i]) * (kStart[i] - kTarget[i]);
  norm = std::sqrt(norm);
  for (size_t i = 0; i < 4; ++i) {
    const double g = 2 * (kStart[i] - kTarget[i]) * 0.5 / norm;
    EXPECT_NEAR(run.w[0][i], kStart[i] - 0.1 * g, 1e-6) << i;
  }
  spec.clip_global_norm = 100.0f;
  const Trained unclipped = train(spec, 1);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(unclipped.w[0][i], kStart[i] - 0.2f * (kStart[i] - kTarget[i]), 1e-6) << i;
}

TEST(Optimizers, SchedulesFollowTheGlobalStep) {
  OptimizerSpec spec;
  spec.learning_rate.kind = LearningRate::Kind::kExponentialDecay;
  spec.learning_rate.initial = 0.5f;
  spec.learning_rate.decay_rate = 0.5f;
  spec.learning_rate.decay_steps = 2;
  Trained run = train(spec, 5);
  for (int s = 0; s < 5; ++s)
    EXPECT_NEAR(run.lr[static_cast<size_t>(s)], 0.5f * std::pow(0.5f, s / 2.0f), 1e-6) << s;
  spec.learning_rate.staircase = true;
  run = train(spec, 5);
  EXPECT_EQ(run.lr, (std::vector<float>{0.5f, 0.5f, 0.25f, 0.25f, 0.125f}));
  spec.learning_rate.kind = LearningRate::Kind::kPiecewiseConstant;
  spec.learning_rate.boundaries = {1, 3};
  spec.learning_rate.values = {1.0f, 0.1f, 0.01f};
  run = train(spec, 5);
  EXPECT_EQ(run.lr, (std::vector<float>{1.0f, 1.0f, 0.1f, 0.1f, 0.01f}));
}

TEST(Optimizers, BadSchedulesAndNamesAreRefused) {
  GraphBuilder b;
  const Value step = global_step(b);
  LearningRate pw;
  pw.kind = LearningRate::Kind::kPiecewiseConstant;
  pw.boundaries = {10, 20};
  pw.values = {1.0f, 0.1f};
  EXPECT_THAT(std::string(learning_rate(b, pw, step).status().message()),
              HasSubstr("piecewise constant: 2 values for 2 boundaries"));
  pw.boundaries = {20, 10};
  pw.values = {1, 2, 3};
  EXPECT_THAT(std::string(learning_rate(b, pw, step).status().message()),
              HasSubstr("boundaries must increase (20 then 10)"));
  LearningRate decay;
  decay.kind = LearningRate::Kind::kExponentialDecay;
  decay.decay_steps = 0;
  EXPECT_THAT(std::string(learning_rate(b, decay, step).status().message()),
              HasSubstr("decay_steps 0 must be >= 1"));
  EXPECT_THAT(std::string(optimizer_kind("adagrad").status().message()),
              HasSubstr("unknown optimizer 'adagrad' (sgd, momentum, adam, lamb)"));
  EXPECT_EQ(*optimizer_kind("lamb"), OptimizerSpec::Kind::kLamb);
  EXPECT_EQ(*optimizer_kind("adam"), OptimizerSpec::Kind::kAdam);
  EXPECT_EQ(global_step(b).id, step.id);  // one global step
}

}  // namespace optimizers_test
}  // namespace tpusim::runtime
