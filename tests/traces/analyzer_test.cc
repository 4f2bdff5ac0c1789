// The step analyzer on constructed timelines: the breakdown sums to the step time, the slowest
// core sets it, waits are exclusive in priority order, and the classification flips at the
// profiler's thresholds; what-ifs come from the host stages.
#include "traces/analyzer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "traces/analysis_events.h"

namespace tpusim::traces {
namespace analyzer_test {

using ::testing::HasSubstr;

constexpr TimePs kUs = 1'000'000;  // ps per microsecond

struct Core {
  TrackId steps, infeed, ici;
};

Core add_core(RecordingSink& t, int core) {
  return {t.declare_track({TrackInfo::Kind::kUnit, 0, core, std::string(kStepsTrack), ""}),
          t.declare_track({TrackInfo::Kind::kUnit, 0, core, "infeed", ""}),
          t.declare_track({TrackInfo::Kind::kUnit, 0, core, std::string(kIciTrack), ""})};
}

// `steps` steps of 100 us back to back, each starting with `wait_us` of infeed wait.
RecordingSink input_waits(double wait_us, int steps = 4) {
  RecordingSink t;
  const Core c = add_core(t, 0);
  for (int s = 0; s < steps; ++s) {
    const TimePs at = static_cast<TimePs>(s) * 100 * kUs;
    t.slice(c.steps, "step " + std::to_string(s), at, at + 100 * kUs);
    if (wait_us > 0)
      t.slice(c.infeed, std::string(kInfeedWait), at, at + static_cast<TimePs>(wait_us * kUs));
    t.slice(c.infeed, "infeed.dequeue", at + static_cast<TimePs>(wait_us * kUs),
            at + static_cast<TimePs>(wait_us * kUs) + kUs);
  }
  return t;
}

double sum_of(const std::map<std::string, double>& m) {
  double s = 0;
  for (const auto& [k, v] : m) s += v;
  return s;
}

TEST(Analyzer, ClassifiesAtTheProfilersThresholds) {
  EXPECT_EQ(analyze(input_waits(20))->classification, "highly_input_bound");
  EXPECT_EQ(analyze(input_waits(19.9))->classification, "moderately_input_bound");
  EXPECT_EQ(analyze(input_waits(5))->classification, "moderately_input_bound");
  EXPECT_EQ(analyze(input_waits(4.9))->classification, "not_input_bound");
  EXPECT_EQ(analyze(input_waits(0))->classification, "not_input_bound");
  EXPECT_EQ(classify_input(0.2), "highly_input_bound");
  EXPECT_EQ(classify_input(0.0499), "not_input_bound");
}

TEST(Analyzer, TheBreakdownSumsToTheStepTimeOfTheSlowestCore) {
  RecordingSink t;
  const Core fast = add_core(t, 0), slow = add_core(t, 1);
  const TrackId loop = t.declare_track({TrackInfo::Kind::kHost, -1, -1, "loop", ""});
  // Two steps per core; the host round trip (10 us) follows step 1 on every core.
  t.slice(fast.steps, "step 1", 0, 80 * kUs);
  t.slice(fast.steps, "step 2", 80 * kUs, 150 * kUs);
  t.slice(slow.steps, "step 1", 0, 90 * kUs);
  t.slice(slow.steps, "step 2", 100 * kUs, 200 * kUs);  // idle 10 us before it
  t.slice(loop, "host round trip", 90 * kUs, 100 * kUs);
  // On the slow core in step 2: 20 us waiting for peers, then a 30 us all-reduce that overlaps
  // a 10 us infeed wait (input wins the overlap).
  t.slice(slow.ici, std::string(kPeerWait), 110 * kUs, 130 * kUs);
  t.slice(slow.ici, "ici.all_reduce", 130 * kUs, 160 * kUs);
  t.slice(slow.infeed, std::string(kInfeedWait), 150 * kUs, 160 * kUs);
  auto a = analyze(t);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->steps.size(), 2u);
  const StepBreakdown& s1 = a->steps[0];
  EXPECT_EQ(s1.core, 1);
  EXPECT_DOUBLE_EQ(s1.seconds, 100e-6);  // 90 us of step + 10 us idle
  EXPECT_DOUBLE_EQ(s1.seconds_by.at("idle"), 10e-6);
  EXPECT_DOUBLE_EQ(s1.seconds_by.at("compute"), 90e-6);
  const StepBreakdown& s2 = a->steps[1];
  EXPECT_EQ(s2.core, 1);
  EXPECT_DOUBLE_EQ(s2.seconds, 100e-6);
  EXPECT_DOUBLE_EQ(s2.seconds_by.at("input"), 10e-6);
  EXPECT_DOUBLE_EQ(s2.seconds_by.at("all_reduce_wait"), 20e-6);
  EXPECT_DOUBLE_EQ(s2.seconds_by.at("all_reduce"), 20e-6);
  EXPECT_DOUBLE_EQ(s2.seconds_by.at("compute"), 50e-6);
  for (const auto& s : a->steps) EXPECT_NEAR(sum_of(s.seconds_by), s.seconds, 1e-15);
  EXPECT_NEAR(sum_of(a->breakdown), a->step_seconds, 1e-15);
  EXPECT_DOUBLE_EQ(a->step_seconds, 100e-6);
  // input 5% on average: moderately input-bound; idle 5% >= 3%: the host-overhead note;
  // all-reduce 20% >= 6%: called out.
  ASSERT_EQ(a->advice.size(), 3u);
  EXPECT_THAT(a->advice[0], HasSubstr("Moderately input-bound"));
  EXPECT_THAT(a->advice[1], HasSubstr("iterations_per_loop"));
  EXPECT_THAT(a->advice[2], HasSubstr("All-reduce"));
  const auto j = a->to_json();
  EXPECT_EQ(j["classification"], "moderately_input_bound");  // 5 us of 100 on average
  EXPECT_EQ(j["per_step"].size(), 2u);
}

// A collective that runs while the core's DMA engines, MXUs or vector unit have work in progress
// (the core's busy track; tpusim's overlapped all-reduce) is hidden behind that work: it counts as
// compute, and as all_reduce_hidden, except where input wins. Unit tracks' own slices do not
// count: the busy track says where work was in progress.
TEST(Analyzer, AnAllReduceUnderComputeIsHiddenNotAWait) {
  RecordingSink t;
  const Core c = add_core(t, 0);
  const TrackId busy = t.declare_track({TrackInfo::Kind::kUnit, 0, 0, std::string(kBusyTrack), ""});
  const TrackId vpu = t.declare_track({TrackInfo::Kind::kUnit, 0, 0, "vpu", ""});
  t.slice(c.steps, "step 1", 0, 100 * kUs);
  t.slice(busy, std::string(kBusySlice), 0, 40 * kUs);
  t.slice(busy, std::string(kBusySlice), 30 * kUs, 60 * kUs);  // busy 0 .. 60 us
  t.slice(vpu, "vpu.add", 60 * kUs, 90 * kUs);
  t.slice(c.ici, std::string(kPeerWait), 50 * kUs, 55 * kUs);
  t.slice(c.ici, "ici.all_reduce", 55 * kUs, 90 * kUs);
  t.slice(c.infeed, std::string(kInfeedWait), 85 * kUs, 95 * kUs);
  auto a = analyze(t);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->steps.size(), 1u);
  const StepBreakdown& s = a->steps[0];
  EXPECT_DOUBLE_EQ(s.seconds_by.at("input"), 10e-6);        // 85 .. 95
  EXPECT_DOUBLE_EQ(s.seconds_by.at("all_reduce_wait"), 0);  // under the DMA
  EXPECT_DOUBLE_EQ(s.seconds_by.at("all_reduce"), 25e-6);   // 60 .. 85
  EXPECT_DOUBLE_EQ(s.seconds_by.at("compute"), 65e-6);      // the rest
  EXPECT_DOUBLE_EQ(s.all_reduce_hidden, 10e-6);             // 50 .. 60
  EXPECT_NEAR(sum_of(s.seconds_by), s.seconds, 1e-15);
  EXPECT_DOUBLE_EQ(a->all_reduce_hidden, 10e-6);
  EXPECT_DOUBLE_EQ(a->to_json()["all_reduce_hidden"].get<double>(), 10e-6);
  EXPECT_THAT(a->to_text(), HasSubstr("(0.010 ms of all-reduce ran while the core computed"));
  // Without the compute units' work the same collective is all wait.
  RecordingSink bare;
  const Core b = add_core(bare, 0);
  bare.slice(b.steps, "step 1", 0, 100 * kUs);
  bare.slice(b.ici, std::string(kPeerWait), 50 * kUs, 55 * kUs);
  bare.slice(b.ici, "ici.all_reduce", 55 * kUs, 90 * kUs);
  auto exposed = analyze(bare);
  ASSERT_TRUE(exposed.ok()) << exposed.status();
  EXPECT_DOUBLE_EQ(exposed->steps[0].seconds_by.at("all_reduce_wait"), 5e-6);
  EXPECT_DOUBLE_EQ(exposed->steps[0].seconds_by.at("all_reduce"), 35e-6);
  EXPECT_DOUBLE_EQ(exposed->all_reduce_hidden, 0);
  EXPECT_THAT(exposed->to_text(), ::testing::Not(HasSubstr("ran while the core computed")));
}

// Host stages: the slowest names the fix, and the what-ifs scale its time per batch.
TEST(Analyzer, NamesTheSlowestHostStageWithWhatIfs) {
  RecordingSink t = input_waits(60);  // 100 us steps, 60 us of which wait for input
  TrackInfo read{TrackInfo::Kind::kHost, -1, -1, "read", ""};
  read.threads = 1;
  TrackInfo map{TrackInfo::Kind::kHost, -1, -1, "map", ""};
  map.threads = 2;
  const TrackId r = t.declare_track(read), m = t.declare_track(map);
  for (int b = 0; b < 4; ++b) {
    const TimePs at = static_cast<TimePs>(b) * 100 * kUs;
    t.slice(r, "batch", at, at + 20 * kUs);
    t.slice(m, "batch", at, at + 100 * kUs);
  }
  auto a = analyze(t);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->classification, "highly_input_bound");
  ASSERT_GE(a->slowest_stage, 0);
  EXPECT_EQ(a->host_stages[static_cast<size_t>(a->slowest_stage)].name, "map");
  ASSERT_EQ(a->what_if.size(), 2u);
  EXPECT_EQ(a->what_if[0].threads, 4u);
  // 2x: map takes 50 us per batch, more than the device's own 40 us, so it still sets the step.
  // 4x: map 25 us, read 20 us, device 40 us: the device sets the step.
  EXPECT_NEAR(a->what_if[0].step_seconds, 50e-6, 1e-12);
  EXPECT_NEAR(a->what_if[1].step_seconds, 40e-6, 1e-12);
  EXPECT_EQ(a->what_if[0].limited_by, "map");
  EXPECT_EQ(a->what_if[1].limited_by, "device");
  EXPECT_THAT(a->advice[0], HasSubstr("'map'"));
  EXPECT_THAT(a->advice[0], ::testing::Not(HasSubstr("then sets the step")));
  EXPECT_EQ(a->to_json()["what_if"][1]["limited_by"], "device");
}

// Two stages as slow as each other: more threads on the one named gain nothing alone, and the
// what-ifs say which stage then sets the step.
TEST(Analyzer, WhatIfsNameTheStageThatThenSetsTheStep) {
  RecordingSink t = input_waits(60);  // 100 us steps, 40 us of the device's own
  TrackInfo batch{TrackInfo::Kind::kHost, -1, -1, "batch", ""};
  TrackInfo enqueue{TrackInfo::Kind::kHost, -1, -1, "enqueue", ""};
  batch.threads = enqueue.threads = 1;
  const TrackId b = t.declare_track(batch), e = t.declare_track(enqueue);
  for (int k = 0; k < 4; ++k) {
    const TimePs at = static_cast<TimePs>(k) * 100 * kUs;
    t.slice(b, "batch", at, at + 100 * kUs);
    t.slice(e, "batch", at, at + 100 * kUs);
  }
  auto a = analyze(t);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->what_if.size(), 2u);
  EXPECT_EQ(a->what_if[0].stage, "batch");
  EXPECT_NEAR(a->what_if[0].step_seconds, 100e-6, 1e-12);
  EXPECT_EQ(a->what_if[0].limited_by, "enqueue");
  EXPECT_EQ(a->what_if[1].limited_by, "enqueue");
  EXPECT_THAT(a->advice[0], HasSubstr("2 threads: 0.100 ms per step, where 'enqueue' then sets "
                                      "the step; 4 threads"));
}

// A core runs its steps one at a time, each once: a trace whose steps track holds a step twice,
// a slice that is not `step N`, a step of no time or two steps at once was read (a renamed step
// dropped or merged, a step number read by sscanf from "step 2.5") into another step time.
TEST(Analyzer, StepsThatNoRunCouldWriteAreRefused) {
  auto with_step = [](const std::string& name, TimePs start, TimePs end) {
    RecordingSink t = input_waits(0, 2);  // steps 0 and 1: [0, 100) and [100, 200) us
    const TrackId steps = t.declare_track({TrackInfo::Kind::kUnit, 0, 0, "steps", ""});
    t.slice(steps, name, start * kUs, end * kUs);
    return analyze(t).status();
  };
  EXPECT_TRUE(with_step("step 2", 200, 300).ok()) << with_step("step 2", 200, 300);
  EXPECT_EQ(with_step("step 1", 200, 300).message(),
            "chip 0 core 0's step 1 appears twice (at 0.000100000 s and 0.000200000 s): the trace "
            "is not one run's");
  EXPECT_EQ(with_step("step 2", 150, 300).message(),
            "chip 0 core 0's step 2 begins at 0.000150000 s, before step 1 ends at 0.000200000 s: "
            "a core runs one step at a time");
  EXPECT_EQ(with_step("step 2", 200, 200).message(),
            "chip 0 core 0's step 2 at 0.000200000 s lasts no time");
  for (const char* name : {"step 2.5", "step -1", "step ", "step 0x10", "Step 2", "step +2"}) {
    EXPECT_EQ(with_step(name, 200, 300).message(),
              str_cat("chip 0 core 0's steps track holds a slice named '", name,
                      "' at 0.000200000 s, where each is 'step N' (N a whole number)"));
  }
}

// Each thread of a stage works one batch at a time: a trace whose batches repeat (every slice
// twice, two runs merged) counted each batch twice and doubled the stage's time a step; it is
// refused, naming the stage and the instant. Two threads may run two batches at once, even the
// same span, and a batch may begin as the last one ends.
TEST(Analyzer, MoreBatchesAtOnceThanAStageHasThreadsAreRefused) {
  auto stage = [](const char* name, uint32_t threads) {
    TrackInfo info{TrackInfo::Kind::kHost, -1, -1, name, ""};
    info.threads = threads;
    return info;
  };
  const TrackInfo one = stage("batch", 1), two = stage("map", 2);
  RecordingSink t = input_waits(60);
  const TrackId b = t.declare_track(one), m = t.declare_track(two);
  for (int k = 0; k < 4; ++k) {
    const TimePs at = static_cast<TimePs>(k) * 100 * kUs;
    t.slice(b, "batch", at, at + 100 * kUs);
    t.slice(m, "batch", at, at + 150 * kUs);
    t.slice(m, "batch", at, at + 150 * kUs);
  }
  // Each step's pair of map batches outlasts the step by 50 us: three at once on two threads.
  auto a = analyze(t);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "host stage 'map' (2 threads) has 3 batches at once at 0.000100000 s, where each of "
            "its threads works one batch at a time: the trace is not one run's (its slices "
            "repeated, or two runs' merged?)");

  RecordingSink repeated = input_waits(60);
  const TrackId r = repeated.declare_track(one);
  for (int k = 0; k < 2; ++k) repeated.slice(r, "batch", 0, 100 * kUs);
  EXPECT_THAT(analyze(repeated).status().message(),
              HasSubstr("host stage 'batch' (1 thread) has 2 batches at once at 0.000000000 s"));

  RecordingSink fine = input_waits(60);
  const TrackId f1 = fine.declare_track(one), f2 = fine.declare_track(two);
  for (int k = 0; k < 4; ++k) {
    const TimePs at = static_cast<TimePs>(k) * 100 * kUs;
    fine.slice(f1, "batch", at, at + 100 * kUs);  // each begins as the last ends
    fine.slice(f2, "batch", at, at + 100 * kUs);  // two threads, the same spans
    fine.slice(f2, "batch", at, at + 100 * kUs);
  }
  EXPECT_TRUE(analyze(fine).ok()) << analyze(fine).status();
}

// Each chip's host link carries the steps' batches after the host stages: its transfer time per
// step (the busiest chip's) bounds the step as a stage does, and when it is slower than every
// stage the advice names the link and bf16 infeeds, not threads.
TEST(Analyzer, TheHostLinkIsALimitThreadsDoNotLift) {
  RecordingSink t = input_waits(60);  // 100 us steps, 40 us of the device's own
  TrackInfo map{TrackInfo::Kind::kHost, -1, -1, "map", ""};
  map.threads = 1;
  const TrackId m = t.declare_track(map);
  const TrackId link0 =
      t.declare_track({TrackInfo::Kind::kUnit, 0, -1, std::string(kHostLinkTrack), ""});
  const TrackId link1 =
      t.declare_track({TrackInfo::Kind::kUnit, 1, -1, std::string(kHostLinkTrack), ""});
  auto with_stage = [&](TimePs map_us) {
    RecordingSink r = t;
    for (int k = 0; k < 4; ++k) {
      const TimePs at = static_cast<TimePs>(k) * 100 * kUs;
      // One thread: each batch after the last, however long they take.
      const TimePs batch_at = static_cast<TimePs>(k) * map_us * kUs;
      r.slice(m, "batch", batch_at, batch_at + map_us * kUs);
      // Two entries a step on chip 1's link (90 us in all), one of 30 us on chip 0's.
      r.slice(link1, std::string(kHostToDevice), at, at + 45 * kUs);
      r.slice(link1, std::string(kHostToDevice), at + 45 * kUs, at + 90 * kUs);
      r.slice(link0, std::string(kHostToDevice), at, at + 30 * kUs);
    }
    return r;
  };
  // The map at 60 us a step: the link (90 us) is the slowest.
  auto linked = analyze(with_stage(60));
  ASSERT_TRUE(linked.ok());
  EXPECT_NEAR(linked->host_link_seconds_per_step, 90e-6, 1e-12);
  EXPECT_EQ(linked->host_link_chip, 1);
  EXPECT_TRUE(linked->host_link_slowest());
  ASSERT_EQ(linked->what_if.size(), 2u);
  EXPECT_NEAR(linked->what_if[0].step_seconds, 90e-6, 1e-12);
  EXPECT_EQ(linked->what_if[0].limited_by, "host_link");
  EXPECT_THAT(linked->advice[0], HasSubstr("The host link is the bottleneck"));
  EXPECT_THAT(linked->advice[0], HasSubstr("chip 1's link busy 0.090 ms"));
  EXPECT_THAT(linked->advice[0], HasSubstr("--infeed-dtype bf16"));
  EXPECT_THAT(linked->to_text(), HasSubstr("host link  chip 1            0.090 ms  <- slowest\n"));
  EXPECT_THAT(linked->to_text(), HasSubstr("map          1 thread(s)     0.060 ms\n"));
  EXPECT_EQ(linked->to_json()["host_link"]["slowest"], true);
  // The map at 120 us: the map is named; twice its threads leave the link in charge at 90 us.
  auto staged = analyze(with_stage(120));
  ASSERT_TRUE(staged.ok());
  EXPECT_FALSE(staged->host_link_slowest());
  EXPECT_THAT(staged->advice[0], HasSubstr("'map'"));
  EXPECT_NEAR(staged->what_if[0].step_seconds, 90e-6, 1e-12);
  EXPECT_EQ(staged->what_if[0].limited_by, "host_link");
  EXPECT_THAT(staged->advice[0], HasSubstr("where 'host_link' then sets the step"));
  EXPECT_THAT(staged->to_text(), HasSubstr("map          1 thread(s)     0.120 ms  <- slowest\n"));
  EXPECT_THAT(staged->to_text(), HasSubstr("host link  chip 1            0.090 ms\n"));
}

// Core 0 waits 30 us of each 100 us step for its peer at the all-reduce while core 1, its peer,
// waits 30 us for infeed: the wait is the peer's late input, and the advice says so instead of
// blaming the gradient exchange. Without the peer's infeed wait it is the exchange's; an exchange
// slow in itself (10 us of all-reduce) is called out either way.
TEST(Analyzer, APeerWaitBehindAPeersInfeedWaitIsCalledInput) {
  auto steps = [](bool peer_fed_late, TimePs exchange_us = 0) {
    RecordingSink t;
    const Core c0 = add_core(t, 0), c1 = add_core(t, 1);
    for (int s = 0; s < 4; ++s) {
      const TimePs at = static_cast<TimePs>(s) * 100 * kUs;
      t.slice(c0.steps, "step " + std::to_string(s), at, at + 100 * kUs);
      t.slice(c1.steps, "step " + std::to_string(s), at, at + 100 * kUs);
      t.slice(c0.ici, std::string(kPeerWait), at + 50 * kUs, at + 80 * kUs);
      if (exchange_us > 0)
        t.slice(c0.ici, "ici.all_reduce", at + 80 * kUs, at + (80 + exchange_us) * kUs);
      if (peer_fed_late) t.slice(c1.infeed, std::string(kInfeedWait), at, at + 30 * kUs);
    }
    return t;
  };
  auto late = analyze(steps(true));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->steps[0].core, 0);
  EXPECT_NEAR(late->breakdown.at("all_reduce_wait"), 30e-6, 1e-12);
  EXPECT_NEAR(late->peers_input, 30e-6, 1e-12);
  EXPECT_NEAR(late->steps[0].peers_input, 30e-6, 1e-12);
  ASSERT_FALSE(late->advice.empty());
  EXPECT_THAT(late->advice[0], HasSubstr("other cores wait for infeed up to 30.0%"));
  EXPECT_THAT(late->advice[0], HasSubstr("count this wait as input too"));
  EXPECT_NEAR(late->to_json()["peers_input"].get<double>(), 30e-6, 1e-12);
  EXPECT_EQ(late->advice.size(), 1u);  // the exchange itself takes nothing
  auto both = analyze(steps(true, 10));
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->advice.size(), 2u);
  EXPECT_THAT(both->advice[0], HasSubstr("count this wait as input too"));
  EXPECT_THAT(both->advice[1], HasSubstr("All-reduce takes 10.0% of each step"));
  auto exchange = analyze(steps(false));
  ASSERT_TRUE(exchange.ok());
  EXPECT_EQ(exchange->peers_input, 0);
  EXPECT_THAT(exchange->advice[0], HasSubstr("amortise the gradient exchange"));
}

TEST(Analyzer, ATraceWithoutStepsIsRefusedWithTheReason) {
  RecordingSink t;
  t.declare_track({TrackInfo::Kind::kUnit, 0, 0, "mxu0", ""});
  auto a = analyze(t);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("no training steps"));
}

}  // namespace analyzer_test
}  // namespace tpusim::traces
