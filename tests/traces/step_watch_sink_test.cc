// StepWatchSink hears the first core's "step G" slices and nothing else.

#include "traces/step_watch_sink.h"

#include <vector>

#include <gtest/gtest.h>

#include "traces/analysis_events.h"

namespace tpusim::traces {
namespace step_watch_sink_test {

TEST(StepWatchSink, HandsOnTheFirstCoresStepNumbers) {
  std::vector<int64_t> heard;
  StepWatchSink sink([&heard](int64_t step) { heard.push_back(step); });
  const TrackId mxu = sink.declare_track({TrackInfo::Kind::kUnit, 0, 0, "mxu0", ""});
  const TrackId other_core =
      sink.declare_track({TrackInfo::Kind::kUnit, 0, 1, std::string(kStepsTrack), ""});
  const TrackId steps =
      sink.declare_track({TrackInfo::Kind::kUnit, 0, 0, std::string(kStepsTrack), ""});
  sink.slice(mxu, "step 3", 0, 1);         // another track
  sink.slice(other_core, "step 4", 0, 1);  // another core
  sink.slice(steps, "step 11", 0, 1);
  sink.slice(steps, "step twelve", 1, 2);  // not a step number
  sink.slice(steps, "step 12x", 1, 2);
  sink.slice(steps, "step 12", 1, 2);
  sink.counter(steps, 2, 1.0);
  EXPECT_EQ(heard, (std::vector<int64_t>{11, 12}));
}

}  // namespace step_watch_sink_test
}  // namespace tpusim::traces
