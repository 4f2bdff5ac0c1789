#include "traces/recording_sink.h"

#include <gtest/gtest.h>

namespace tpusim::traces {
namespace recording_sink_test {

TEST(RecordingSink, KeepsTracksSlicesAndSamplesInOrder) {
  RecordingSink sink;
  const TrackId mxu = sink.declare_track({TrackInfo::Kind::kUnit, 0, 1, "mxu0", ""});
  const TrackId dma = sink.declare_track({TrackInfo::Kind::kUnit, 0, 1, "dma", ""});
  const TrackId depth =
      sink.declare_track({TrackInfo::Kind::kCounter, 0, 1, "infeed_depth", "entries"});
  EXPECT_NE(mxu, dma);
  sink.slice(dma, "dma.load", 0, 1000);
  sink.slice(mxu, "mxu.matmul", 500, 2500);
  sink.slice(mxu, "mxu.matmul", 2500, 4500);
  sink.counter(depth, 100, 3);

  EXPECT_EQ(sink.tracks().size(), 3u);
  EXPECT_EQ(sink.track(depth).unit, "entries");
  ASSERT_EQ(sink.slices().size(), 3u);
  EXPECT_EQ(sink.slices()[0].name, "dma.load");
  const auto on_mxu = sink.slices_on(0, 1, "mxu0");
  ASSERT_EQ(on_mxu.size(), 2u);
  EXPECT_EQ(on_mxu[1].start, 2500u);
  EXPECT_EQ(on_mxu[1].end, 4500u);
  EXPECT_TRUE(sink.slices_on(0, 0, "mxu0").empty());
  ASSERT_EQ(sink.samples().size(), 1u);
  EXPECT_DOUBLE_EQ(sink.samples()[0].value, 3);
}

}  // namespace recording_sink_test
}  // namespace tpusim::traces
