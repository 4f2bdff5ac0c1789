// Rate counters averaged over windows on their way to a trace file (counter_binning_sink.h).
#include "traces/counter_binning_sink.h"

#include <gtest/gtest.h>

#include "traces/recording_sink.h"

namespace tpusim::traces {
namespace counter_binning_sink_test {

// The integral of a recorded step function from its first sample to `end`.
double integral(const RecordingSink& sink, TrackId track, TimePs end) {
  double sum = 0;
  const RecordingSink::Sample* last = nullptr;
  for (const auto& s : sink.samples()) {
    if (s.track != track) continue;
    if (last != nullptr) sum += last->value * static_cast<double>(s.time - last->time);
    last = &s;
  }
  if (last != nullptr) sum += last->value * static_cast<double>(end - last->time);
  return sum;
}

// A link busy at full rate over [100, 250) and at half over [300, 1200), windows of 100 ps: one
// average per window where it changes, the same integral, the level after the last sample.
TEST(CounterBinningSink, AveragesRateCountersPerWindowKeepingTheirIntegral) {
  RecordingSink out;
  CounterBinningSink sink(&out, 100);
  const TrackId link =
      sink.declare_track({TrackInfo::Kind::kCounter, 0, -1, "ici_link_utilization +x", "fraction"});
  const TrackId depth =
      sink.declare_track({TrackInfo::Kind::kCounter, 0, 0, "infeed_queue_depth", "entries"});
  const TrackId mxu = sink.declare_track({TrackInfo::Kind::kUnit, 0, 0, "mxu0", ""});
  sink.counter(link, 100, 1.0);
  sink.counter(link, 250, 0.0);
  sink.counter(depth, 260, 3);  // not a rate: passes through as it is
  sink.slice(mxu, "mxu.matmul", 0, 400);
  sink.counter(link, 300, 0.5);
  sink.counter(link, 1200, 0.0);
  sink.flush();
  std::vector<std::pair<TimePs, double>> got;
  for (const auto& s : out.samples()) {
    if (s.track == link) got.emplace_back(s.time, s.value);
  }
  // [100,200) 1; [200,300) half busy, and [300,1200) at 0.5 too: one sample; 0 from 1200.
  EXPECT_EQ(got, (std::vector<std::pair<TimePs, double>>{{100, 1.0}, {200, 0.5}, {1200, 0.0}}));
  EXPECT_DOUBLE_EQ(integral(out, link, 2000), 150 * 1.0 + 900 * 0.5);
  ASSERT_EQ(out.slices().size(), 1u);
  int depth_samples = 0;
  for (const auto& s : out.samples()) depth_samples += s.track == depth ? 1 : 0;
  EXPECT_EQ(depth_samples, 1);
}

// Thousands of chunk-sized changes inside each window become one sample a window.
TEST(CounterBinningSink, ManyChangesInAWindowBecomeOneSample) {
  RecordingSink out;
  CounterBinningSink sink(&out, 1000);
  const TrackId hbm =
      sink.declare_track({TrackInfo::Kind::kCounter, 0, 0, "hbm_bandwidth", "bytes/s"});
  double exact = 0;
  for (TimePs t = 0; t < 10000; t += 10) {  // busy 3 ps of every 10 at 1e9 bytes/s
    sink.counter(hbm, t, 1e9);
    sink.counter(hbm, t + 3, 0);
    exact += 3 * 1e9;
  }
  sink.flush();
  EXPECT_LE(out.samples().size(), 11u);
  EXPECT_NEAR(integral(out, hbm, 20000), exact, exact * 1e-12);
  EXPECT_TRUE(CounterBinningSink::is_rate({TrackInfo::Kind::kCounter, 0, 0, "x", "bytes/s"}));
  EXPECT_FALSE(CounterBinningSink::is_rate({TrackInfo::Kind::kCounter, 0, 0, "x", "entries"}));
  EXPECT_FALSE(CounterBinningSink::is_rate({TrackInfo::Kind::kUnit, 0, 0, "x", "fraction"}));
}

}  // namespace counter_binning_sink_test
}  // namespace tpusim::traces
