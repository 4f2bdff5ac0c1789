// The infeed driver: host batches split over the cores they feed (per host) or one pipeline per
// core, component-to-infeed conversion and its errors, and each step's ready time from the host
// model in deterministic and measured mode.
#include "runtime/infeed/infeed_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/graph/builder.h"

namespace tpusim::runtime {
namespace infeed_driver_test {

using ::testing::HasSubstr;

data::FeatureValue floats(std::vector<int64_t> shape, float first) {
  data::FeatureValue v;
  v.type = data::FeatureType::kFloat;
  v.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  for (int64_t i = 0; i < n; ++i) v.floats.push_back(first + static_cast<float>(i));
  return v;
}

data::FeatureValue ints(std::vector<int64_t> values) {
  data::FeatureValue v;
  v.type = data::FeatureType::kInt64;
  v.shape = {static_cast<int64_t>(values.size())};
  v.ints = std::move(values);
  return v;
}

// Host batches of 8 rows of x[., 3] and label, `count` of them, batch k starting at 100 k.
data::DatasetPtr host_batches(int count, int rows = 8) {
  std::vector<data::Element> batches;
  for (int k = 0; k < count; ++k) {
    std::vector<int64_t> labels;
    for (int r = 0; r < rows; ++r) labels.push_back(k * 10 + r);
    batches.push_back({{"x", floats({rows, 3}, 100.0f * k)}, {"label", ints(labels)}});
  }
  return data::Dataset::from_elements(std::move(batches));
}

Graph two_infeeds(int rows_per_replica) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {rows_per_replica, 3});
  const Value label = b.infeed("label", DType::kS32, {rows_per_replica});
  b.output("y", x * 2.0f);
  b.output("l", label);
  return b.graph();
}

InfeedOptions fixed_costs(uint32_t replicas, std::vector<double> seconds) {
  InfeedOptions o;
  o.replicas = replicas;
  o.timing.cpu_cores = 8;
  o.timing.stages = standard_stages(1, 1);
  o.timing.stage_seconds = std::move(seconds);
  return o;
}

TEST(InfeedDriver, SplitsAHostBatchOverItsCores) {
  auto driver = InfeedDriver::create(two_infeeds(2), {{host_batches(3), nullptr}},
                                     fixed_costs(4, {0, 0, 0, 0}));
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto loop = (*driver)->next_loop(2, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  ASSERT_EQ(loop->size(), 2u);
  for (int s = 0; s < 2; ++s) {
    const LoopStep& step = (*loop)[static_cast<size_t>(s)];
    ASSERT_EQ(step.replicas.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      const HostTensor& x = step.replicas[static_cast<size_t>(r)].at("x");
      const HostTensor& label = step.replicas[static_cast<size_t>(r)].at("label");
      EXPECT_EQ(x.shape, (Shape{2, 3}));
      EXPECT_EQ(x.f[0], 100.0f * s + 6 * r) << "step " << s << " replica " << r;
      EXPECT_EQ(x.f[5], 100.0f * s + 6 * r + 5);
      EXPECT_EQ(label.dtype, DType::kS32);
      EXPECT_EQ(label.i, (std::vector<int32_t>{s * 10 + 2 * r, s * 10 + 2 * r + 1}));
    }
  }
  EXPECT_EQ((*driver)->steps_taken(), 2u);
}

// PER_HOST_V2: the pipeline batches at the per-core size and its cores take the batches in turn.
TEST(InfeedDriver, DealsPerCoreBatchesInTurn) {
  InfeedOptions o = fixed_costs(2, {0, 0, 0, 0});
  o.deal_per_core_batches = true;
  auto driver = InfeedDriver::create(two_infeeds(8), {{host_batches(5), nullptr}}, o);
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto loop = (*driver)->next_loop(2, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ((*loop)[0].replicas[0].at("x").f[0], 0.0f);
  EXPECT_EQ((*loop)[0].replicas[1].at("x").f[0], 100.0f);
  EXPECT_EQ((*loop)[1].replicas[0].at("x").f[0], 200.0f);
  EXPECT_EQ((*loop)[1].replicas[1].at("x").f[0], 300.0f);
  EXPECT_EQ((*driver)->host_models()[0].batches(), 4u);
}

// A resumed run fast-forwards: skipped steps are read and dropped, and cost the host nothing.
TEST(InfeedDriver, SkipFastForwardsTheInput) {
  auto driver = InfeedDriver::create(two_infeeds(2), {{host_batches(4), nullptr}},
                                     fixed_costs(4, {1, 1, 1, 1}));
  ASSERT_TRUE(driver.ok());
  ASSERT_TRUE((*driver)->skip(2).ok());
  EXPECT_EQ((*driver)->steps_taken(), 2u);
  EXPECT_EQ((*driver)->host_models()[0].batches(), 0u);
  auto loop = (*driver)->next_loop(1, 0);
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ((*loop)[0].replicas[0].at("x").f[0], 200.0f);
  EXPECT_EQ((*driver)->skip(5).code(), absl::StatusCode::kOutOfRange);
}

TEST(InfeedDriver, OnePipelinePerReplicaFeedsItsOwnCore) {
  auto driver =
      InfeedDriver::create(two_infeeds(8), {{host_batches(2), nullptr}, {host_batches(2), nullptr}},
                           fixed_costs(2, {0, 0, 0, 0}));
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto loop = (*driver)->next_loop(2, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ((*loop)[1].replicas[0].at("x").f[0], 100.0f);
  EXPECT_EQ((*loop)[1].replicas[1].at("x").f[0], 100.0f);
  EXPECT_EQ((*loop)[1].replicas[1].at("x").shape, (Shape{8, 3}));
}

double ready(const LoopStep& step) { return step.host->ready_seconds(step.host_step); }

// Stages read 1, map 4, batch and enqueue 0.5 s, one thread each on 8 cores: the first batch is
// ready at 6 s, then one every 4 s (the map sets the pace). Host time 0 is the device time the
// first loop began at, 100 s here; the second loop's steps go on from there.
TEST(InfeedDriver, StepsAreReadyWhenTheHostTimelineSays) {
  auto driver = InfeedDriver::create(two_infeeds(8), {{host_batches(6), nullptr}},
                                     fixed_costs(1, {1, 4, 0.5, 0.5}));
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto first = (*driver)->next_loop(3, 100);
  ASSERT_TRUE(first.ok());
  EXPECT_DOUBLE_EQ(ready((*first)[0]), 106.0);
  EXPECT_DOUBLE_EQ(ready((*first)[1]), 110.0);
  EXPECT_DOUBLE_EQ(ready((*first)[2]), 114.0);
  auto second = (*driver)->next_loop(3, 120);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)[0].host_step, 3u);
  EXPECT_DOUBLE_EQ(ready((*second)[0]), 118.0);
  EXPECT_DOUBLE_EQ(ready((*second)[1]), 122.0);
  EXPECT_DOUBLE_EQ(ready((*second)[2]), 126.0);
  EXPECT_EQ((*driver)->host_models()[0].stages()[1].name, "map");
}

// A device that takes each step late holds the host up: with prefetch depth 2, batch k can
// leave the enqueue stage only once step k-2 was taken.
TEST(InfeedDriver, TakenStepsFreeTheHostsPrefetchBuffer) {
  auto driver = InfeedDriver::create(two_infeeds(8), {{host_batches(4), nullptr}},
                                     fixed_costs(1, {1, 1, 1, 1}));
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto loop = (*driver)->next_loop(4, 0);
  ASSERT_TRUE(loop.ok());
  HostSchedule& host = *(*loop)[0].host;
  EXPECT_DOUBLE_EQ(host.ready_seconds(0), 4.0);
  host.taken(0, 50);
  EXPECT_DOUBLE_EQ(host.ready_seconds(1), 5.0);
  host.taken(1, 60);
  EXPECT_DOUBLE_EQ(host.ready_seconds(2), 50.0);  // done at 6, held until step 0 left
  host.taken(2, 70);
  EXPECT_DOUBLE_EQ(host.ready_seconds(3), 60.0);
}

// Every replica's share converted on 3 enqueue threads is what one thread gives, split (8 rows
// over 4 replicas) or dealt (a batch per replica), and a bad row fails the step with its place.
TEST(InfeedDriver, EnqueueThreadsConvertTheReplicasSharesAtOnce) {
  for (bool deal : {false, true}) {
    auto feeds = [&](uint32_t threads) {
      InfeedOptions o = fixed_costs(4, {0, 0, 0, 0});
      o.deal_per_core_batches = deal;
      o.timing.enqueue_threads = threads;
      auto driver =
          InfeedDriver::create(two_infeeds(deal ? 8 : 2), {{host_batches(12), nullptr}}, o);
      EXPECT_TRUE(driver.ok()) << driver.status();
      auto loop = (*driver)->next_loop(3, 0);
      EXPECT_TRUE(loop.ok()) << loop.status();
      std::vector<std::vector<float>> out;
      for (const LoopStep& step : *loop) {
        for (const Feeds& replica : step.replicas) {
          out.push_back(replica.at("x").f);
          for (int32_t label : replica.at("label").i) out.back().push_back(-1.0f - label);
        }
      }
      return out;
    };
    const auto one = feeds(1);
    ASSERT_EQ(one.size(), 12u);
    EXPECT_EQ(one[1][0], deal ? 100.0f : 6.0f);
    EXPECT_EQ(feeds(3), one) << (deal ? "dealt" : "split");
    EXPECT_EQ(feeds(8), one) << (deal ? "dealt" : "split");
  }
  std::vector<data::Element> bad = {
      {{"x", floats({8, 3}, 0)}, {"label", ints({0, 1, 2, 3, 4, 1ll << 40, 6, 1ll << 41})}}};
  InfeedOptions o = fixed_costs(4, {0, 0, 0, 0});
  o.timing.enqueue_threads = 4;
  auto driver =
      InfeedDriver::create(two_infeeds(2), {{data::Dataset::from_elements(bad), nullptr}}, o);
  ASSERT_TRUE(driver.ok());
  auto loop = (*driver)->next_loop(1, 0);
  ASSERT_FALSE(loop.ok());
  EXPECT_THAT(std::string(loop.status().message()),
              HasSubstr("input pipeline 0, step 0: component 'label' element 5 is "
                        "1099511627776, outside infeed 'label''s s32"));
}

TEST(InfeedDriver, MeasuredModeChargesEachStageItsCpuTime) {
  auto profile = std::make_shared<data::StageProfile>();
  // Each element burns 2 ms of CPU in "decode".
  auto burn = [](data::Element e) -> absl::StatusOr<data::Element> {
    const uint64_t until = data::thread_cpu_ns() + 2'000'000;
    volatile uint64_t spin = 0;
    while (data::thread_cpu_ns() < until) spin = spin + 1;
    return e;
  };
  auto ds = host_batches(4)->profiled(profile, "read")->map(profile->timed("decode", burn));
  InfeedOptions o;
  o.replicas = 1;
  o.timing.cpu_cores = 4;
  o.timing.enqueue_threads = 2;
  auto driver = InfeedDriver::create(two_infeeds(8), {{ds, profile}}, o);
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto loop = (*driver)->next_loop(4, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const HostPipelineModel& m = (*driver)->host_models()[0];
  ASSERT_EQ(m.stages().size(), 3u);
  EXPECT_EQ(m.stages()[0].name, "read");
  EXPECT_EQ(m.stages()[1].name, "decode");
  EXPECT_EQ(m.stages()[2].name, "enqueue");
  EXPECT_EQ(m.stages()[2].threads, 2u);
  EXPECT_EQ(m.busiest_stage(), 1u);
  EXPECT_GE(m.busy_seconds()[1], 4 * 2e-3);
  // One decode thread: the last batch cannot be ready before four decodes' CPU time.
  EXPECT_GE(ready(loop->back()), 4 * 2e-3);
  for (size_t s = 1; s < loop->size(); ++s) EXPECT_GT(ready((*loop)[s]), ready((*loop)[s - 1]));
}

TEST(InfeedDriver, RenamesComponentsAndLeavesUnusedOnesOnTheHost) {
  std::vector<data::Element> batches = {
      {{"image", floats({2, 3}, 0)}, {"label", ints({1, 2})}, {"mask", floats({2}, 1)}}};
  InfeedOptions o = fixed_costs(1, {0, 0, 0, 0});
  o.infeed_of = {{"image", "x"}};
  auto driver =
      InfeedDriver::create(two_infeeds(2), {{data::Dataset::from_elements(batches), nullptr}}, o);
  ASSERT_TRUE(driver.ok());
  auto loop = (*driver)->next_loop(1, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ((*loop)[0].replicas[0].size(), 2u);
  EXPECT_EQ((*loop)[0].replicas[0].at("x").f[4], 4.0f);
}

TEST(InfeedDriver, Bf16InfeedsGetRoundedValues) {
  GraphBuilder b;
  b.output("y", b.infeed("x", DType::kBF16, {1, 3}));
  data::FeatureValue v = floats({1, 3}, 0);
  v.floats = {1.0f + 1.0f / 512, 3.14159f, -2.0f};
  auto driver =
      InfeedDriver::create(b.graph(), {{data::Dataset::from_elements({{{"x", v}}}), nullptr}},
                           fixed_costs(1, {0, 0, 0, 0}));
  ASSERT_TRUE(driver.ok());
  auto loop = (*driver)->next_loop(1, 0);
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ((*loop)[0].replicas[0].at("x").f, (std::vector<float>{1.0f, 3.140625f, -2.0f}));
}

absl::Status first_loop_error(const Graph& g, std::vector<data::Element> batches,
                              uint32_t replicas = 1) {
  auto driver =
      InfeedDriver::create(g, {{data::Dataset::from_elements(std::move(batches)), nullptr}},
                           fixed_costs(replicas, {0, 0, 0, 0}));
  if (!driver.ok()) return driver.status();
  auto loop = (*driver)->next_loop(2, 0);
  return loop.ok() ? absl::OkStatus() : loop.status();
}

TEST(InfeedDriver, BadBatchesAreNamed) {
  const Graph g = two_infeeds(4);
  // Rows that do not split: 6 rows for 2 replicas of 4.
  EXPECT_THAT(
      std::string(
          first_loop_error(g, {{{"x", floats({6, 3}, 0)}, {"label", ints({0, 1, 2, 3, 4, 5})}}}, 2)
              .message()),
      HasSubstr("input pipeline 0, step 0: component 'x' is float[6, 3]; infeed 'x' takes "
                "f32[4, 3] on each of 2 replicas, so the host batch must be [8, 3]"));
  EXPECT_THAT(std::string(first_loop_error(g, {{{"x", floats({4, 3}, 0)}}}).message()),
              HasSubstr("no component 'label' for infeed 'label'; the batch has x"));
  data::FeatureValue bytes;
  bytes.type = data::FeatureType::kBytes;
  bytes.shape = {4, 3};
  bytes.bytes.assign(12, "b");
  EXPECT_THAT(
      std::string(first_loop_error(g, {{{"x", bytes}, {"label", ints({0, 1, 2, 3})}}}).message()),
      HasSubstr("component 'x' holds bytes; infeed 'x' takes f32 (decode it in the map"));
  EXPECT_THAT(
      std::string(
          first_loop_error(g, {{{"x", floats({4, 3}, 0)}, {"label", floats({4}, 0)}}}).message()),
      HasSubstr("component 'label' holds float; infeed 'label' takes s32"));
  EXPECT_THAT(
      std::string(
          first_loop_error(g, {{{"x", floats({4, 3}, 0)}, {"label", ints({0, 1, 1ll << 40, 3})}}})
              .message()),
      HasSubstr("component 'label' element 2 is 1099511627776, outside infeed 'label''s s32"));
  // One good batch, then the input ends.
  const absl::Status ended =
      first_loop_error(g, {{{"x", floats({4, 3}, 0)}, {"label", ints({0, 1, 2, 3})}}});
  EXPECT_EQ(ended.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(ended.message()), HasSubstr("input pipeline 0 ended after 1 steps"));
}

TEST(InfeedDriver, PipelineErrorsCarryThePipelineAndStep) {
  auto failing = host_batches(3, 4)->map([](data::Element e) -> absl::StatusOr<data::Element> {
    if (e.at("label").ints[0] == 10) return absl::DataLossError("bad record");
    return e;
  });
  auto driver =
      InfeedDriver::create(two_infeeds(4), {{failing, nullptr}}, fixed_costs(1, {0, 0, 0, 0}));
  ASSERT_TRUE(driver.ok());
  auto loop = (*driver)->next_loop(3, 0);
  ASSERT_FALSE(loop.ok());
  EXPECT_EQ(loop.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(loop.status().message()),
              HasSubstr("input pipeline 0, step 1: map, element 1: bad record"));
}

TEST(InfeedDriver, BadOptionsAreRefused) {
  const Graph g = two_infeeds(4);
  EXPECT_THAT(
      std::string(InfeedDriver::create(g, {{host_batches(1), nullptr}, {host_batches(1), nullptr}},
                                       fixed_costs(3, {0, 0, 0, 0}))
                      .status()
                      .message()),
      HasSubstr("3 replicas do not split evenly over 2 input pipelines"));
  EXPECT_THAT(std::string(InfeedDriver::create(g, {{host_batches(1), nullptr}}, fixed_costs(1, {0}))
                              .status()
                              .message()),
              HasSubstr("4 stages but 1 stage costs"));
  InfeedOptions measured;
  EXPECT_THAT(
      std::string(
          InfeedDriver::create(g, {{host_batches(1), nullptr}}, measured).status().message()),
      HasSubstr("input pipeline 0 has no stage profile, and no fixed stage costs"));
}

}  // namespace infeed_driver_test
}  // namespace tpusim::runtime
