// The busy track merges a core's work spans into runs as they come and reports each run once.
#include "sim/stats/busy_track.h"

#include <gtest/gtest.h>

#include "traces/recording_sink.h"

namespace tpusim::sim {
namespace busy_track_test {

std::vector<std::pair<traces::TimePs, traces::TimePs>> runs(const traces::RecordingSink& sink) {
  std::vector<std::pair<traces::TimePs, traces::TimePs>> out;
  for (const auto& s : sink.slices()) {
    EXPECT_EQ(s.name, traces::kBusySlice);
    out.emplace_back(s.start, s.end);
  }
  return out;
}

TEST(BusyTrack, MergesTouchingAndOverlappingSpansIntoRuns) {
  traces::RecordingSink sink;
  BusyTrack busy(&sink, sink.declare_track({traces::TrackInfo::Kind::kUnit, 0, 0, "busy", ""}));
  busy.add(100, 200);
  busy.add(150, 180);                  // inside
  busy.add(200, 260);                  // touches: the same run
  busy.add(90, 120);                   // starts earlier but overlaps: the run grows back
  EXPECT_TRUE(sink.slices().empty());  // the run is still open
  busy.add(300, 310);                  // after a gap: the first run is complete
  busy.add(10, 20);                    // ends before the open run: reported alone
  busy.add(305, 305);                  // empty: nothing
  busy.flush();
  busy.flush();  // nothing open: nothing more
  using Runs = std::vector<std::pair<traces::TimePs, traces::TimePs>>;
  EXPECT_EQ(runs(sink), (Runs{{90, 260}, {10, 20}, {300, 310}}));
}

TEST(BusyTrack, ReportsNothingWithoutARecordingSink) {
  BusyTrack none;
  EXPECT_FALSE(none.recording());
  none.add(0, 10);
  none.flush();
}

}  // namespace busy_track_test
}  // namespace tpusim::sim
