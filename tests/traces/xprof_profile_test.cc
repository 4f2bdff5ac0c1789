// The XProf profile's layout (traces/xprof_profile.h, xprof_sink.h): the op line nested or
// disjoint with every op keeping its start, an infeed op taking the wait before it, tf.data's
// iterator names, host stages spread over lines where they overlap, steps as the step analyzer
// counts them, and group_id declared on every plane.
#include "traces/xprof_profile.h"

#include <cstdio>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "traces/analysis_events.h"
#include "traces/xprof_sink.h"
#include "traces/xspace_reader.h"

namespace tpusim::traces {
namespace xprof_profile_test {

using ::testing::ElementsAre;

struct Event {
  std::string name;
  int64_t start, end;
  bool operator==(const Event& o) const {
    return name == o.name && start == o.start && end == o.end;
  }
};
std::ostream& operator<<(std::ostream& os, const Event& e) {
  return os << e.name << " [" << e.start << ", " << e.end << ")";
}

std::vector<Event> events(const xprof::XPlane& plane, const std::string& line_name) {
  std::vector<Event> out;
  for (const xprof::XLine& line : plane.lines()) {
    if (line.name() != line_name) continue;
    for (const xprof::XEvent& e : line.events()) {
      out.push_back({plane.event_metadata().at(e.metadata_id()).name(), e.offset_ps(),
                     e.offset_ps() + e.duration_ps()});
    }
  }
  return out;
}

XprofProfile two_op_core() {
  XprofProfile p;
  p.device_type = "TPU v3";
  p.ops = {{"x", "infeed", 0, 64},
           {"dense/matmul", "matmul", 1000, 100},
           {"relu", "fused", 10, 50},
           {"bias", "fused", 5, 10}};
  XprofCore c;
  c.ordinal = 0;
  c.steps[1] = {0, 1000};
  // The infeed waited [10, 40) and dequeued [40, 50); the matmul [60, 200) overlaps the relu
  // [150, 300), which starts under it and outlasts it; the bias [70, 90) sits inside the matmul.
  c.ops = {{0, 1, {40, 50}}, {1, 1, {60, 200}}, {2, 1, {150, 300}}, {3, 1, {70, 90}}};
  c.infeed_waits = {{10, 40}};
  p.cores.push_back(c);
  return p;
}

TEST(XprofProfile, TheOpLineIsNestedOrDisjointAndTheInfeedTakesItsWait) {
  const xprof::XSpace space = to_xspace(two_op_core());
  ASSERT_EQ(space.planes_size(), 2);
  EXPECT_EQ(space.planes(0).name(), "/device:TPU:0");
  EXPECT_EQ(space.planes(1).name(), "/host:CPU");
  EXPECT_THAT(events(space.planes(0), "XLA Ops"),
              ElementsAre(Event{"x", 10, 50}, Event{"dense/matmul", 60, 150}, Event{"bias", 70, 90},
                          Event{"relu", 150, 300}));
  EXPECT_THAT(events(space.planes(0), "Steps"), ElementsAre(Event{"1", 0, 1000}));
}

TEST(XprofProfile, OpMetadataCarriesXlaCategoryFlopsAndBytesAsIntegers) {
  const xprof::XSpace space = to_xspace(two_op_core());
  const xprof::XPlane& plane = space.planes(0);
  std::map<std::string, xprof::XStat> stats;
  for (const auto& [id, m] : plane.event_metadata()) {
    if (m.name() != "dense/matmul") continue;
    for (const xprof::XStat& s : m.stats())
      stats[plane.stat_metadata().at(s.metadata_id()).name()] = s;
  }
  EXPECT_EQ(stats["hlo_category"].str_value(), "convolution");
  EXPECT_EQ(stats["flops"].int64_value(), 1000);
  EXPECT_EQ(stats["bytes_accessed"].int64_value(), 100);
  EXPECT_EQ(stats["tf_op"].str_value(), "dense/matmul:Matmul");
  EXPECT_EQ(stats["symbol_id"].int64_value(), 2);
  EXPECT_EQ(stats["program_id"].int64_value(), 1);
  // group_id is declared on the host plane too, so XProf takes the profile as grouped.
  bool declared = false;
  for (const auto& [id, m] : space.planes(1).stat_metadata()) declared |= m.name() == "group_id";
  EXPECT_TRUE(declared);
}

TEST(XprofProfile, HostStagesAreTfDataIteratorsOnAsManyLinesAsTheyOverlap) {
  XprofProfile p;
  p.host_stages = {{"read", 1, {{1, {0, 10}}}},
                   {"map", 2, {{1, {10, 30}}, {2, {15, 35}}, {3, {30, 50}}}},
                   {"batch", 1, {{1, {30, 40}}}},
                   {"enqueue", 1, {{1, {40, 45}}}}};
  EXPECT_EQ(iterator_name(p.host_stages, 0), "Iterator::Root::Prefetch::Batch::Map::TFRecord");
  EXPECT_EQ(iterator_name(p.host_stages, 1), "Iterator::Root::Prefetch::Batch::Map");
  EXPECT_EQ(iterator_name(p.host_stages, 2), "Iterator::Root::Prefetch::Batch");
  const xprof::XSpace space = to_xspace(p);
  const xprof::XPlane& host = space.planes(0);
  EXPECT_THAT(events(host, "map thread 0"),
              ElementsAre(Event{"Iterator::Root::Prefetch::Batch::Map", 10, 30},
                          Event{"Iterator::Root::Prefetch::Batch::Map", 30, 50}));
  EXPECT_THAT(events(host, "map thread 1"),
              ElementsAre(Event{"Iterator::Root::Prefetch::Batch::Map", 15, 35}));
  EXPECT_THAT(events(host, "enqueue thread 0"),
              ElementsAre(Event{"InfeedEnqueueTuple:InfeedEnqueueTuple", 40, 45}));
}

// A step runs until the core's next step begins (through the host's round trip between loops);
// the last step until the end of the round trip after it, as the step analyzer counts them.
TEST(XprofDeviceSink, StepsRunToTheNextStepOrTheEndOfTheRoundTrip) {
  XprofDeviceSink sink(2);
  const TrackId steps = sink.declare_track({TrackInfo::Kind::kUnit, 1, 1, "steps", "", 0});
  const TrackId infeed = sink.declare_track({TrackInfo::Kind::kUnit, 1, 1, "infeed", "", 0});
  const TrackId loop =
      sink.declare_track({TrackInfo::Kind::kHost, -1, -1, std::string(kHostLoopTrack), "", 0});
  sink.slice(steps, "step 1", 0, 90);
  sink.slice(steps, "step 2", 100, 180);
  sink.slice(loop, "host round trip", 180, 250);
  sink.slice(steps, "step 3", 260, 300);
  sink.slice(loop, "host round trip", 300, 380);
  sink.slice(infeed, "infeed.wait", 100, 120);
  sink.slice(infeed, "infeed.dequeue", 120, 125);
  const auto all = sink.steps();
  ASSERT_EQ(all.count(3), 1u);  // chip 1, core 1 of two a chip: TPU:3
  std::vector<std::tuple<int64_t, TimePs, TimePs>> got;
  for (const auto& [step, span] : all.at(3)) got.emplace_back(step, span.start, span.end);
  EXPECT_THAT(got,
              ElementsAre(std::tuple{1, 0, 100}, std::tuple{2, 100, 260}, std::tuple{3, 260, 380}));
  ASSERT_EQ(sink.infeed_waits().count(3), 1u);
  ASSERT_EQ(sink.infeed_waits().at(3).size(), 1u);
  EXPECT_EQ(sink.infeed_waits().at(3)[0].start, 100u);
}

// A profile read back for the analyzer (xspace_reader.h): its steps, its infeed op as the core's
// wait, its host stage lines as a stage; and what is wrong in one, named.
TEST(XspaceReader, ReadsStepsInfeedWaitsAndHostStagesAndNamesWhatIsWrong) {
  const std::string path = ::testing::TempDir() + "xspace_reader_test.xplane.pb";
  XprofProfile p = two_op_core();
  XprofHostStage map;
  map.name = "map";
  map.batches = {{1, {0, 400}}, {1, {100, 500}}};  // two at once: two lines, two threads
  p.host_stages.push_back(map);
  const auto write = [&](const xprof::XSpace& space) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << space.SerializeAsString();
  };
  const xprof::XSpace good = to_xspace(p);
  write(good);
  auto read = read_xspace(path);
  ASSERT_TRUE(read.ok()) << read.status();
  const auto on = [&](const std::string& track) {
    std::vector<Event> out;
    for (const auto& s : (*read)->slices()) {
      if ((*read)->track(s.track).name == track)
        out.push_back({s.name, static_cast<int64_t>(s.start), static_cast<int64_t>(s.end)});
    }
    return out;
  };
  EXPECT_THAT(on("steps"), ElementsAre(Event{"step 1", 0, 1000}));
  EXPECT_THAT(on("infeed"), ElementsAre(Event{"infeed.wait", 10, 50}));
  EXPECT_THAT(on("map"), ElementsAre(Event{"batch", 0, 400}, Event{"batch", 100, 500}));
  for (const auto& t : (*read)->tracks()) {
    if (t.name == "map") {
      EXPECT_EQ(t.threads, 2u);
    }
  }

  xprof::XSpace bad = good;
  bad.mutable_planes(0)->mutable_lines(0)->mutable_events(0)->set_metadata_id(999);
  write(bad);
  EXPECT_THAT(std::string(read_xspace(path).status().message()),
              ::testing::HasSubstr("plane 0 '/device:TPU:0', line 'Steps': an event names "
                                   "metadata 999, which the plane lacks"));
  bad = good;
  bad.mutable_planes(0)->mutable_lines(0)->mutable_events(0)->set_offset_ps(-5);
  write(bad);
  EXPECT_THAT(std::string(read_xspace(path).status().message()),
              ::testing::HasSubstr("is not within [0, 10^15] ps"));
  bad = good;
  bad.mutable_planes()->DeleteSubrange(0, 1);
  write(bad);
  EXPECT_THAT(std::string(read_xspace(path).status().message()),
              ::testing::HasSubstr("no /device:TPU:N plane"));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "\xff\xff\xff";
  EXPECT_THAT(std::string(read_xspace(path).status().message()),
              ::testing::HasSubstr("not an XSpace"));
  std::remove(path.c_str());
}

}  // namespace xprof_profile_test
}  // namespace tpusim::traces
