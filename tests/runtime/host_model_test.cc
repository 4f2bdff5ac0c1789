// The host model: the production-line recurrence, prefetch depth 0, cores shared by threads,
// what-if replays, the standard stages' costs from a host config, and the host timeline's
// per-host parts of a step.
#include "runtime/infeed/host_model.h"

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/infeed/host_timeline.h"

namespace tpusim::runtime {
namespace host_model_test {

// read 1 s, map 4 s on 2 threads (2 s of wall time), batch and enqueue 0.5 s: the first batch
// needs 1 + 2 + 0.5 + 0.5 = 4 s, then one leaves every 2 s (the map, the slowest stage).
TEST(HostModel, StagesOverlapLikeAProductionLine) {
  HostPipelineModel m(standard_stages(1, 2), 8, 2);
  const std::vector<double> cost = {1, 4, 0.5, 0.5};
  EXPECT_DOUBLE_EQ(m.add_batch(cost), 4.0);
  EXPECT_DOUBLE_EQ(m.add_batch(cost), 6.0);
  EXPECT_DOUBLE_EQ(m.add_batch(cost), 8.0);
  EXPECT_EQ(m.stages()[m.busiest_stage()].name, "map");
  EXPECT_DOUBLE_EQ(m.busy_seconds()[1], 6.0);
  EXPECT_DOUBLE_EQ(m.busy_seconds()[0], 3.0);
}

// Batch and enqueue on 4 threads each: 0.5 s of CPU takes 0.125 s of wall time, so with read
// 1 s and map 4 s on 2 threads the first batch needs 1 + 2 + 0.125 + 0.125 s.
TEST(HostModel, TheStandardStagesTakeBatchAndEnqueueThreads) {
  const std::vector<HostStage> stages = standard_stages(1, 2, 4, 4);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[2].name, "batch");
  EXPECT_EQ(stages[2].threads, 4u);
  EXPECT_EQ(stages[3].name, "enqueue");
  EXPECT_EQ(stages[3].threads, 4u);
  EXPECT_EQ(standard_stages(1, 2)[3].threads, 1u);
  HostPipelineModel m(stages, 16, 2);
  EXPECT_DOUBLE_EQ(m.add_batch({1, 4, 0.5, 0.5}), 3.25);
  EXPECT_DOUBLE_EQ(m.busy_seconds()[2], 0.125);
}

// A slow first batch delays the next ones only where a stage is still busy with it.
TEST(HostModel, ABatchWaitsForTheStageAheadAndForItsPredecessor) {
  HostPipelineModel m({{"a", 1}, {"b", 1}}, 4, 1);
  EXPECT_DOUBLE_EQ(m.add_batch({5, 1}), 6.0);   // a: 0-5, b: 5-6
  EXPECT_DOUBLE_EQ(m.add_batch({1, 3}), 9.0);   // a: 5-6, b: 6-9
  EXPECT_DOUBLE_EQ(m.add_batch({1, 1}), 10.0);  // a: 6-7, b: 9-10
}

TEST(HostModel, WithoutPrefetchTheStagesRunOneAfterAnother) {
  HostPipelineModel m(standard_stages(1, 2), 8, 0);
  const std::vector<double> cost = {1, 4, 0.5, 0.5};
  EXPECT_DOUBLE_EQ(m.add_batch(cost), 4.0);
  EXPECT_DOUBLE_EQ(m.add_batch(cost), 8.0);
  EXPECT_DOUBLE_EQ(m.add_batch(cost), 12.0);
}

// Two 1 s stages and a prefetch buffer of 2, emptied by a device that takes a batch every 10 s
// from 10 s on. Batch 2 is done at 4 s but waits in the last stage until batch 0 leaves the
// buffer; then the first stage is held too: batch 5 starts at 10 s, not at 5 s.
TEST(HostModel, AFullPrefetchBufferHoldsEveryStage) {
  HostPipelineModel m({{"a", 1}, {"b", 1}}, 4, 2);
  m.record_spans(true);
  for (int k = 0; k < 6; ++k) m.push({1, 1});
  EXPECT_DOUBLE_EQ(m.ready(0), 2.0);
  EXPECT_DOUBLE_EQ(m.ready(1), 3.0);
  for (uint64_t k = 2; k < 6; ++k) {
    m.set_taken(k - 2, 10.0 * static_cast<double>(k - 1));
    EXPECT_DOUBLE_EQ(m.ready(k), 10.0 * static_cast<double>(k - 1)) << k;
  }
  const auto spans = m.take_spans();
  ASSERT_EQ(spans.size(), 6u);
  EXPECT_EQ(spans[2][1], std::make_pair(3.0, 4.0));    // b works on batch 2 from 3 to 4 s
  EXPECT_EQ(spans[3][1], std::make_pair(10.0, 11.0));  // and on batch 3 once 2 left it
  EXPECT_EQ(spans[5][0], std::make_pair(10.0, 11.0));  // a starts batch 5 at 10 s
  // The host alone (nobody reports a batch taken) runs on at one batch a second.
  HostPipelineModel alone({{"a", 1}, {"b", 1}}, 4, 2);
  for (int k = 0; k < 6; ++k) EXPECT_DOUBLE_EQ(alone.add_batch({1, 1}), 2.0 + k);
}

// Without prefetch the infeed asks for batch k once it took batch k-1.
TEST(HostModel, WithoutPrefetchABatchStartsWhenTheLastWasTaken) {
  HostPipelineModel m({{"a", 1}, {"b", 1}}, 4, 0);
  m.push({1, 1});
  m.push({1, 1});
  EXPECT_DOUBLE_EQ(m.ready(0), 2.0);
  m.set_taken(0, 10);
  EXPECT_DOUBLE_EQ(m.ready(1), 12.0);
}

// 1 + 8 + 1 + 1 = 11 threads on 4 cores: each thread gets 4/11 of a core.
TEST(HostModel, ThreadsBeyondTheCoresShareThem) {
  HostPipelineModel m(standard_stages(1, 8), 4, 2);
  EXPECT_DOUBLE_EQ(m.effective_threads(1), 8.0 * 4 / 11);
  EXPECT_DOUBLE_EQ(m.effective_threads(0), 4.0 / 11);
  HostPipelineModel roomy(standard_stages(1, 8), 96, 2);
  EXPECT_DOUBLE_EQ(roomy.effective_threads(1), 8.0);
}

TEST(HostModel, WhatIfReplaysTheSameBatchesWithMoreThreads) {
  HostPipelineModel m(standard_stages(1, 1), 96, 2);
  for (int k = 0; k < 10; ++k) m.add_batch({0.1, 4, 0.1, 0.1});
  EXPECT_DOUBLE_EQ(m.last_ready_seconds(), 0.1 + 40 + 0.2);
  const HostPipelineModel twice = m.with_threads(1, 2);
  const HostPipelineModel four = m.with_threads(1, 4);
  EXPECT_EQ(twice.batches(), 10u);
  EXPECT_DOUBLE_EQ(twice.last_ready_seconds(), 0.1 + 20 + 0.2);
  EXPECT_DOUBLE_EQ(four.last_ready_seconds(), 0.1 + 10 + 0.2);
  EXPECT_EQ(m.stages()[1].threads, 1u);  // the original is unchanged
}

// The v3-8 host's costs for a 224x224 JPEG example of 20 KB that is decoded, resized to
// 224x224 and augmented, fed as f32 224x224x3.
TEST(HostModel, StandardStageCostsComeFromTheHostConfig) {
  auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  const config::HostStageCostsSpec& c = (*slice)->host.stage_costs;
  ExampleWork e;
  e.record_bytes = 20000;
  e.jpeg_pixels = e.resized_pixels = e.augmented_pixels = 224 * 224;
  e.batch_bytes = 224 * 224 * 3 * 4;
  const auto s = standard_stage_seconds(c, e, 256);
  ASSERT_EQ(s.size(), 4u);
  // host_96.pbtxt: file_read 1000 us/MiB, parse 5 us, jpeg 10000 us/Mpixel, resize 3000,
  // augment 1000, batch and enqueue 100 us/MiB.
  EXPECT_NEAR(s[0], 256 * 20000 * 1000e-6 / (1 << 20), 1e-12);
  EXPECT_NEAR(s[1], 256 * (5e-6 + 224 * 224 * (10000 + 3000 + 1000) * 1e-12), 1e-12);
  EXPECT_NEAR(s[2], 256 * 224 * 224 * 3 * 4 * 100e-6 / (1 << 20), 1e-12);
  EXPECT_DOUBLE_EQ(s[3], s[2]);
}

}  // namespace host_model_test
}  // namespace tpusim::runtime

namespace tpusim::runtime {
namespace host_model_test {

// Four pipelines on two hosts (pipelines 0-1 on host 0, 2-3 on host 1), one stage each, the
// last pipeline of each host the slowest: each host's part of a step is ready when its own
// pipelines' batches are, and taking it frees only its own pipelines' buffers. Pipelines that do
// not split evenly over the hosts make one part.
TEST(HostTimeline, EachHostsPartOfAStepIsItsOwnPipelines) {
  std::vector<HostPipelineModel> models;
  for (double cost : {1.0, 2.0, 3.0, 5.0}) {
    models.emplace_back(std::vector<HostStage>{{"map", 1}}, 1, 1);
    for (int k = 0; k < 3; ++k) models.back().push({cost});
  }
  HostTimeline timeline(models, 1, 2);
  EXPECT_EQ(timeline.hosts(), 2u);
  timeline.start_at(10);
  EXPECT_DOUBLE_EQ(timeline.host_ready_seconds(0, 0), 12);
  EXPECT_DOUBLE_EQ(timeline.host_ready_seconds(0, 1), 15);
  EXPECT_DOUBLE_EQ(timeline.ready_seconds(0), 15);
  // (Device seconds; host time 0 is device time 10.) Host 0 takes step 0 at once, and its next
  // batches are ready at 14. Host 1's buffer (one batch deep) stays full until it takes its part
  // at 30: pipeline 3's second batch, done at 20, is ready only then.
  timeline.host_taken(0, 0, 12);
  EXPECT_DOUBLE_EQ(timeline.host_ready_seconds(1, 0), 14);
  timeline.host_taken(0, 1, 30);
  EXPECT_DOUBLE_EQ(timeline.host_ready_seconds(1, 1), 30);
  EXPECT_EQ(HostTimeline(models, 1, 3).hosts(), 1u);
  EXPECT_EQ(HostTimeline(models, 1, 8).hosts(), 1u);
}

}  // namespace host_model_test
}  // namespace tpusim::runtime
