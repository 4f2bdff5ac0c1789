// TPUEstimator.evaluate, predict and export_saved_model on the cpu backend, from a checkpoint
// train wrote: metric_fn on the host, the predict input's padding dropped, a saved model that
// predicts as the estimator does, and the mistakes each refuses by name.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/saved_model.h"
#include "runtime/backend/registry.h"
#include "sim/numerics/bf16.h"
#include "tests/configs/config_test_util.h"
#include "tests/estimator/estimator_test_util.h"

namespace tpusim::estimator {
namespace estimator_eval_test {

using config::testing::TempDir;
using runtime::OptimizerSpec;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using namespace testing;

absl::StatusOr<std::unique_ptr<TPUEstimator>> trained_estimator(const std::string& dir) {
  if (auto r = train_linear(dir, 60); !r.ok()) return r.status();
  return create_quiet(linear_model(OptimizerSpec::Kind::kAdam), quiet_run(dir, "cpu", 4), 32, 32,
                      32);
}

TEST(Estimator, EvaluateRunsMetricFnOnTheHostOverEveryStepAndReplica) {
  TempDir dir;
  auto est = trained_estimator(dir.path().string());
  ASSERT_TRUE(est.ok()) << est.status();
  auto m = (*est)->evaluate(eval_input(), 8);  // 8 steps x 32 = all 256 examples
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->at("global_step"), 60);
  EXPECT_GT(m->at("accuracy"), 0.8);
  EXPECT_LT(m->at("loss"), 0.6);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "eval"));
  // The eval input must not end early.
  auto early = (*est)->evaluate(eval_input(), 9);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(early.status().message()), HasSubstr("must not end early"));
}

// A log the held input below waits on: its first element comes only once the log has said
// `awaited` (or after 30 s, so that a watch that never reports fails the test, not hangs it).
class HeldInput {
 public:
  explicit HeldInput(std::string awaited) : awaited_(std::move(awaited)) {}
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(m_);
    lines_.push_back(line);
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return said(awaited_); });
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(m_);
    return lines_;
  }
  // `in` with its first element held by wait().
  runtime::data::DatasetPtr hold(const runtime::data::DatasetPtr& in) {
    auto first = std::make_shared<std::atomic<bool>>(true);
    return in->map(
        [this, first](runtime::data::Element e) -> absl::StatusOr<runtime::data::Element> {
          if (first->exchange(false)) wait();
          return e;
        });
  }

 private:
  bool said(const std::string& text) const {
    for (const auto& l : lines_) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }
  const std::string awaited_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// The reads of the host input outside the infeed driver (train's and evaluate's first batch,
// which give the infeeds their shapes; predict's batches) are watched as its pulls are: a first
// batch that does not come is named in the log, and so is its coming.
TEST(Estimator, ReadsBeforeTheInfeedStartsAreWatchedForStalls) {
  TempDir dir;
  auto run = [&](const std::string& awaited, auto&& call) {
    auto held = std::make_shared<HeldInput>(awaited);
    QuietRun c = quiet_run(dir.path().string(), "cpu", 4);
    c.sim.input_stall_report_seconds = 0.01;
    c.sim.log = [held](const std::string& line) { held->add(line); };
    auto est = create_quiet(linear_model(OptimizerSpec::Kind::kAdam), c, 32, 32, 32);
    EXPECT_TRUE(est.ok()) << est.status();
    if (est.ok()) call(**est, *held);
    return held->lines();
  };
  auto train_lines =
      run("input pipeline 0: no first batch after", [](TPUEstimator& e, HeldInput& h) {
        InputFn in = [&h](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
          return h.hold(examples())->repeat()->batch(p.batch_size, true);
        };
        EXPECT_TRUE(e.train(in, 5).ok());
      });
  EXPECT_THAT(train_lines, Contains(AllOf(HasSubstr("input pipeline 0: no first batch after"),
                                          HasSubstr("still waiting"))));
  EXPECT_THAT(train_lines, Contains(HasSubstr("input pipeline 0: first batch came after")));

  auto eval_lines = run("eval input: no first batch after", [](TPUEstimator& e, HeldInput& h) {
    InputFn in = [&h](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
      return h.hold(examples())->batch(p.batch_size, true);
    };
    EXPECT_TRUE(e.evaluate(in, 1).ok());
  });
  EXPECT_THAT(eval_lines, Contains(HasSubstr("eval input: first batch came after")));

  auto predict_lines = run("predict input: no batch 0 after", [](TPUEstimator& e, HeldInput& h) {
    InputFn in = [&h](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
      return h.hold(examples()->take(8))->batch(p.batch_size, false, /*pad_to_full=*/true);
    };
    EXPECT_TRUE(e.predict(in).ok());
  });
  EXPECT_THAT(predict_lines, Contains(HasSubstr("predict input: batch 0 came after")));
}

TEST(Estimator, PredictDropsThePaddingOfTheLastBatch) {
  TempDir dir;
  auto est = trained_estimator(dir.path().string());
  ASSERT_TRUE(est.ok()) << est.status();
  // 50 examples: batches of 8 per shard, 4 shards: one full step of 32 and a step of 18 real
  // rows (a padded batch and two padding batches).
  auto p = (*est)->predict(predict_input(50));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 50u);
  auto all = runtime::data::collect(*examples()->take(50));
  ASSERT_TRUE(all.ok());
  int right = 0;
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ((*p)[i].at("logits").shape, (runtime::Shape{3}));
    right += (*p)[i].at("class").i[0] == (*all)[i].at("label").ints[0];
  }
  EXPECT_GT(right, 40);
}

// The exported predict step, loaded without the model code, predicts what predict() does.
TEST(Estimator, ASavedModelPredictsLikeTheEstimator) {
  TempDir dir;
  auto est = trained_estimator(dir.path().string());
  ASSERT_TRUE(est.ok()) << est.status();
  const std::string saved = (dir.path() / "saved").string();
  ASSERT_TRUE((*est)->export_saved_model(saved, {{"x", runtime::DType::kF32, {4}}}, 8).ok());
  auto model = load_saved_model(saved);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->batch_size, 8);
  EXPECT_EQ(model->global_step, 60);
  ASSERT_EQ(model->inputs.size(), 1u);
  EXPECT_EQ(model->inputs[0].shape, (runtime::Shape{8, 4}));
  EXPECT_EQ(model->predictions, (std::vector<std::string>{"class", "logits"}));
  auto expected = (*est)->predict(predict_input(8));
  ASSERT_TRUE(expected.ok());
  auto all = runtime::data::collect(*examples()->take(8));
  ASSERT_TRUE(all.ok());
  runtime::HostTensor x = runtime::HostTensor::zeros(runtime::DType::kF32, {8, 4});
  for (size_t i = 0; i < 8; ++i) {
    std::copy((*all)[i].at("x").floats.begin(), (*all)[i].at("x").floats.end(),
              x.f.begin() + static_cast<long>(i * 4));
  }
  auto backend = runtime::make_backend("cpu");
  auto exe = (*backend)->compile(model->graph, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto out = (*backend)->run(**exe, model->variables, {{{"x", x}}}, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ((*out)[0].at("prediction/class").i[i], (*expected)[i].at("class").i[0]) << i;
  // A damaged folder is refused, naming the file.
  std::filesystem::remove(std::filesystem::path(saved) / "variables.tpuckpt");
  EXPECT_THAT(std::string(load_saved_model(saved).status().message()),
              HasSubstr("variables.tpuckpt"));
  EXPECT_THAT(std::string(load_saved_model(dir.path().string()).status().message()),
              HasSubstr("no saved model at"));
}

TEST(Estimator, EvaluateAndPredictNeedACheckpointAndAnInputThatBehaves) {
  TempDir dir;
  auto est = create_quiet(linear_model(OptimizerSpec::Kind::kAdam),
                          quiet_run(dir.path().string(), "cpu", 4), 32, 32, 32);
  ASSERT_TRUE(est.ok());
  EXPECT_THAT(std::string((*est)->evaluate(eval_input(), 2).status().message()),
              HasSubstr("no checkpoint in model_dir"));
  ASSERT_TRUE((*est)->train(train_input(), 5).ok());
  QuietRun c = quiet_run(dir.path().string(), "cpu", 4);
  c.sim.max_predict_batches = 20;
  auto capped = create_quiet(linear_model(OptimizerSpec::Kind::kAdam), c, 32, 32, 32);
  ASSERT_TRUE(capped.ok());
  InputFn forever = [](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return examples()->repeat()->batch(p.batch_size, true);
  };
  EXPECT_THAT(std::string((*capped)->predict(forever).status().message()),
              HasSubstr("the predict input did not end after 20 batches"));
  InputFn unpadded = [](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return examples()->take(10)->batch(p.batch_size);
  };
  EXPECT_THAT(std::string((*capped)->predict(unpadded).status().message()),
              HasSubstr("predict batch 1: component 'label' has 2 rows; the per-shard batch is 8"));
  auto no_eval = create_quiet(linear_model(OptimizerSpec::Kind::kAdam),
                              quiet_run(dir.path().string(), "cpu", 4), 32, 0, 32);
  ASSERT_TRUE(no_eval.ok());
  EXPECT_THAT(std::string((*no_eval)->evaluate(eval_input(), 1).status().message()),
              HasSubstr("eval_batch_size is 0"));
}

}  // namespace estimator_eval_test
}  // namespace tpusim::estimator
