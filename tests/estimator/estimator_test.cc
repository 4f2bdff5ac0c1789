// TPUEstimator.train on the cpu backend: the loss falls, checkpoints and summaries land in
// model_dir, a resumed run ends bitwise where an uninterrupted one does, and the API's rules are
// enforced with TensorFlow's messages.
#include "estimator/estimator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "estimator/checkpoint.h"
#include "estimator/saved_model.h"
#include "runtime/backend/registry.h"
#include "sim/numerics/bf16.h"
#include "tests/configs/config_test_util.h"
#include "tests/estimator/estimator_test_util.h"

namespace tpusim::estimator {
namespace estimator_test {

using config::testing::TempDir;
using runtime::OptimizerSpec;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using namespace testing;
using testing::train_linear;

TEST(Estimator, TrainingLowersTheLossAndWritesCheckpointsAndSummaries) {
  TempDir dir;
  auto r = train_linear(dir.path().string(), 40);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step, 40);
  EXPECT_EQ(r->steps_run, 40);
  ASSERT_EQ(r->losses.size(), 40u);
  EXPECT_LT(r->final_loss, r->losses.front() * 0.6f);
  const auto ckpts = list_checkpoints(dir.path().string());
  ASSERT_EQ(ckpts.size(), 4u);  // steps 10, 20, 30, 40
  EXPECT_THAT(ckpts.back(), HasSubstr("model.ckpt-40.tpuckpt"));
  auto latest = load_checkpoint(ckpts.back());
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->variables.at("global_step").f[0], 40.0f);
  EXPECT_EQ(weights_fingerprint(latest->variables), r->weights_fingerprint);
  int event_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    event_files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_EQ(event_files, 1);
}

// 20 steps at once, or 10, a new estimator, and 10 more: the same weights, bit for bit.
TEST(Estimator, AResumedRunEndsBitwiseWhereAnUninterruptedOneDoes) {
  for (auto kind : {OptimizerSpec::Kind::kSgd, OptimizerSpec::Kind::kAdam}) {
    TempDir once, twice;
    auto a = train_linear(once.path().string(), 20, kind);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b1 = train_linear(twice.path().string(), 10, kind);
    ASSERT_TRUE(b1.ok()) << b1.status();
    auto b2 = train_linear(twice.path().string(), 20, kind);
    ASSERT_TRUE(b2.ok()) << b2.status();
    EXPECT_EQ(b2->steps_run, 10);
    EXPECT_EQ(b2->global_step, 20);
    EXPECT_EQ(a->weights_fingerprint, b2->weights_fingerprint);
    EXPECT_EQ(std::vector<float>(a->losses.begin() + 10, a->losses.end()), b2->losses);
    // Already there: nothing to do.
    auto again = train_linear(twice.path().string(), 20, kind);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->steps_run, 0);
    EXPECT_EQ(again->weights_fingerprint, a->weights_fingerprint);
  }
}

// The seed's MNIST CNN learns on Fashion-MNIST on the cpu backend within a short budget.
TEST(Estimator, MnistCnnLossFallsOnCpu) {
  TempDir dir;
  auto r = train_mnist_cnn_briefly(dir.path().string(), "cpu");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto [first, last] = loss_ends(r->losses, 3);
  EXPECT_LT(last, first * 0.8) << "first " << first << " last " << last;
}

// host_call runs on the host after each loop, once per step, with the step's global step and its
// tensors stacked over the replicas.
TEST(Estimator, HostCallSeesEveryStepsTensors) {
  TempDir dir;
  std::vector<int64_t> steps;
  std::vector<runtime::Shape> shapes;
  ModelFn with_host_call = [&](runtime::GraphBuilder& b, const Features& f,
                               std::optional<runtime::Value> labels, Mode mode,
                               const Params& p) -> absl::StatusOr<TPUEstimatorSpec> {
    auto spec = linear_model(OptimizerSpec::Kind::kSgd)(b, f, labels, mode, p);
    if (!spec.ok()) return spec;
    spec->host_call_tensors = {{"labels", *labels}};
    spec->host_call_fn = [&](int64_t step, const std::map<std::string, runtime::HostTensor>& t) {
      steps.push_back(step);
      shapes.push_back(t.at("labels").shape);
      return absl::OkStatus();
    };
    return spec;
  };
  auto est = create_quiet(with_host_call, quiet_run(dir.path().string(), "cpu", 4), 32, 32, 32);
  ASSERT_TRUE(est.ok());
  ASSERT_TRUE((*est)->train(train_input(), 7).ok());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shapes.back(), (runtime::Shape{32}));  // 4 replicas x 8 labels
}

// A new model_dir warm-started from a trained one starts from its weights, with the global step
// and the optimizer's slots afresh.
TEST(Estimator, WarmStartTakesTheModelVariables) {
  TempDir trained, fresh;
  ASSERT_TRUE(train_linear(trained.path().string(), 10).ok());
  auto source = load_latest_checkpoint(trained.path().string());
  ASSERT_TRUE(source.ok() && source->has_value());
  QuietRun c = quiet_run(fresh.path().string(), "cpu", 4);
  c.warm_start_from = trained.path().string();
  ModelFn frozen = [](runtime::GraphBuilder& b, const Features& f,
                      std::optional<runtime::Value> labels, Mode mode,
                      const Params& p) -> absl::StatusOr<TPUEstimatorSpec> {
    auto spec = linear_model(OptimizerSpec::Kind::kAdam)(b, f, labels, mode, p);
    if (spec.ok()) spec->train_op->learning_rate.initial = 0;  // weights stay as loaded
    return spec;
  };
  auto est = create_quiet(frozen, c, 32, 32, 32);
  ASSERT_TRUE(est.ok());
  auto r = (*est)->train(train_input(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  auto after = load_latest_checkpoint(fresh.path().string());
  ASSERT_TRUE(after.ok() && after->has_value());
  const auto& got = (*after)->variables;
  EXPECT_EQ(got.at("dense_1/kernel").f, (*source)->variables.at("dense_1/kernel").f);
  EXPECT_EQ(got.at("global_step").f[0], 1.0f);
  EXPECT_NE(got.at("beta1_power").f[0], (*source)->variables.at("beta1_power").f[0]);
}

// The spec's init_fn (Scaffold.init_fn) adjusts the fresh variables of a new model_dir, after its
// warm start; a resumed run restores its checkpoint without calling it; its error stops training.
TEST(Estimator, InitFnAdjustsTheFreshVariablesOnly) {
  TempDir trained, fresh;
  ASSERT_TRUE(train_linear(trained.path().string(), 10).ok());
  auto source = load_latest_checkpoint(trained.path().string());
  ASSERT_TRUE(source.ok() && source->has_value());
  const std::vector<float> warm = (*source)->variables.at("dense_1/kernel").f;
  int calls = 0;
  absl::Status init_status = absl::OkStatus();
  ModelFn doubled = [&](runtime::GraphBuilder& b, const Features& f,
                        std::optional<runtime::Value> labels, Mode mode,
                        const Params& p) -> absl::StatusOr<TPUEstimatorSpec> {
    auto spec = linear_model(OptimizerSpec::Kind::kSgd)(b, f, labels, mode, p);
    if (!spec.ok()) return spec;
    spec->train_op->learning_rate.initial = 0;  // the weights stay as init_fn leaves them
    spec->init_fn = [&](runtime::Variables* v) {
      ++calls;
      for (float& x : v->at("dense_1/kernel").f) x *= 2;
      return init_status;
    };
    return spec;
  };
  QuietRun c = quiet_run(fresh.path().string(), "cpu", 4);
  c.warm_start_from = trained.path().string();
  auto est = create_quiet(doubled, c, 32, 32, 32);
  ASSERT_TRUE(est.ok());
  ASSERT_TRUE((*est)->train(train_input(), 1).ok());
  EXPECT_EQ(calls, 1);
  auto after = load_latest_checkpoint(fresh.path().string());
  ASSERT_TRUE(after.ok() && after->has_value());
  const std::vector<float>& got = (*after)->variables.at("dense_1/kernel").f;
  ASSERT_EQ(got.size(), warm.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 2 * warm[i]) << i;
  // Resumed: restored from step 1, not doubled again.
  ASSERT_TRUE((*est)->train(train_input(), 2).ok());
  EXPECT_EQ(calls, 1);
  auto resumed = load_latest_checkpoint(fresh.path().string());
  ASSERT_TRUE(resumed.ok() && resumed->has_value());
  EXPECT_EQ((*resumed)->variables.at("dense_1/kernel").f, got);
  // A failing init_fn stops a new run, naming itself.
  TempDir third;
  init_status = absl::InvalidArgumentError("no pretrained weights");
  auto failing = create_quiet(doubled, quiet_run(third.path().string(), "cpu", 4), 32, 32, 32);
  ASSERT_TRUE(failing.ok());
  auto r = (*failing)->train(train_input(), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "model_fn's init_fn: no pretrained weights");
  // It may change values, not the variables: a reshaped one is named.
  TempDir fourth;
  ModelFn reshaping = [](runtime::GraphBuilder& b, const Features& f,
                         std::optional<runtime::Value> labels, Mode mode,
                         const Params& p) -> absl::StatusOr<TPUEstimatorSpec> {
    auto spec = linear_model(OptimizerSpec::Kind::kSgd)(b, f, labels, mode, p);
    if (spec.ok()) {
      spec->init_fn = [](runtime::Variables* v) {
        v->at("dense_1/kernel") = runtime::HostTensor::zeros(runtime::DType::kF32, {3, 3});
        return absl::OkStatus();
      };
    }
    return spec;
  };
  auto reshaped = create_quiet(reshaping, quiet_run(fourth.path().string(), "cpu", 4), 32, 32, 32);
  ASSERT_TRUE(reshaped.ok());
  r = (*reshaped)->train(train_input(), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("model_fn's init_fn changed variable 'dense_1/kernel' from f32["));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(" to f32[3, 3] (9 values)"));
}

TEST(Estimator, BatchSizesMustDivideByTheReplicas) {
  TempDir dir;
  auto est = create_quiet(linear_model(OptimizerSpec::Kind::kSgd),
                          quiet_run(dir.path().string(), "cpu", 4), 30, 32, 32);
  ASSERT_FALSE(est.ok());
  EXPECT_THAT(std::string(est.status().message()),
              HasSubstr("train_batch_size 30 must be divisible by the 4 replicas (num_shards)"));
  QuietRun no_dir = quiet_run("", "cpu", 4);
  EXPECT_THAT(std::string(create_quiet(linear_model(OptimizerSpec::Kind::kSgd), no_dir, 32, 32, 32)
                              .status()
                              .message()),
              HasSubstr("model_dir is empty"));
}

TEST(Estimator, ModelAndInputMistakesAreNamed) {
  TempDir dir;
  ModelFn no_optimizer = [](runtime::GraphBuilder& b, const Features& f,
                            std::optional<runtime::Value>, Mode,
                            const Params&) -> absl::StatusOr<TPUEstimatorSpec> {
    TPUEstimatorSpec spec;
    spec.loss = runtime::layers::reduce_mean(f.at("x"), {0, 1});
    (void)b;
    return spec;
  };
  auto est = create_quiet(no_optimizer, quiet_run(dir.path().string(), "cpu", 2), 8, 8, 8);
  ASSERT_TRUE(est.ok());
  EXPECT_THAT(std::string((*est)->train(train_input(), 5).status().message()),
              HasSubstr("train mode needs a train_op"));
  auto linear = create_quiet(linear_model(OptimizerSpec::Kind::kSgd),
                             quiet_run(dir.path().string(), "cpu", 2), 8, 8, 8);
  InputFn short_input = [](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return examples()->take(3 * p.batch_size)->batch(p.batch_size, true);
  };
  const absl::Status ended = (*linear)->train(short_input, 5).status();
  EXPECT_EQ(ended.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(ended.message()), HasSubstr("input pipeline 0 ended after 1 steps"));
}

// SimulatorOptions::fold_replicas: the folded replicas compute no values, so it needs timing_only.
TEST(Estimator, ReplicaFoldingNeedsATimingOnlyRun) {
  TempDir dir;
  QuietRun config = quiet_run(dir.path().string(), "cpu", 2);
  config.sim.fold_replicas = true;
  auto est = create_quiet(linear_model(OptimizerSpec::Kind::kSgd), config, 8, 8, 8);
  ASSERT_TRUE(est.ok()) << est.status();
  const absl::Status s = (*est)->train(train_input(), 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("fold_replicas runs timing-only (timing_only): the folded replicas "
                        "compute no values"));
}

// SimulatorOptions::bf16_infeeds: the host casts "x" to bfloat16 for the infeed and the model_fn
// sees it as f32 holding those values, in training (other weights than f32 input gives) and
// predict; naming a component the batches lack, or an int64 one, is an error that names it.
TEST(Estimator, Bf16InfeedsFeedTheHostsBfloat16CastOfTheirComponents) {
  TempDir f32_dir, bf16_dir;
  QuietRun half = quiet_run(bf16_dir.path().string(), "cpu", 4);
  half.sim.bf16_infeeds = {"x"};
  auto make = [](const ModelFn& model, const QuietRun& config) {
    return create_quiet(model, config, 32, 32, 32);
  };
  auto linear = linear_model(OptimizerSpec::Kind::kAdam);
  auto full =
      (*make(linear, quiet_run(f32_dir.path().string(), "cpu", 4)))->train(train_input(), 20);
  auto rounded = (*make(linear, half))->train(train_input(), 20);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(rounded.ok()) << rounded.status();
  EXPECT_LT(rounded->final_loss, rounded->losses.front() * 0.8f);
  EXPECT_NE(rounded->weights_fingerprint, full->weights_fingerprint);
  // The features the model sees: x as predicted, each the bf16 rounding of the example's value.
  ModelFn echo = [](runtime::GraphBuilder&, const Features& f, std::optional<runtime::Value>, Mode,
                    const Params&) -> absl::StatusOr<TPUEstimatorSpec> {
    TPUEstimatorSpec spec;
    EXPECT_EQ(f.at("x").dtype(), runtime::DType::kF32);
    spec.predictions = {{"x", f.at("x")}};
    return spec;
  };
  auto seen = (*make(echo, half))->predict(predict_input(40));
  ASSERT_TRUE(seen.ok()) << seen.status();
  auto all = runtime::data::collect(*examples()->take(40));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(seen->size(), 40u);
  int changed = 0;
  for (size_t i = 0; i < 40; ++i) {
    for (size_t k = 0; k < 4; ++k) {
      const float given = (*all)[i].at("x").floats[k];
      EXPECT_EQ((*seen)[i].at("x").f[k], sim::round_to_bf16(given)) << i << " " << k;
      changed += (*seen)[i].at("x").f[k] != given;
    }
  }
  EXPECT_GT(changed, 100);
  for (const char* wrong : {"label", "nope"}) {
    TempDir fresh;
    QuietRun bad = half;
    bad.config.model_dir = fresh.path().string();
    bad.sim.bf16_infeeds = {wrong};
    auto r = (*make(linear, bad))->train(train_input(), 5);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << wrong;
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(str_cat("bf16_infeeds names '", wrong, "'")));
  }
}

}  // namespace estimator_test
}  // namespace tpusim::estimator
