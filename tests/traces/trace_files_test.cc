// Trace files: both formats read back into the same tracks, slices and counters; Perfetto files
// decode as Perfetto's Trace message; Chrome JSON parses and its slices nest per track; bad
// files are named with their offset or event.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "traces/perfetto_trace.pb.h"
#include "traces/tee_sink.h"
#include "traces/trace_reader.h"
#include "traces/trace_router.h"
#include "traces/trace_writer.h"

namespace tpusim::traces {
namespace trace_files_test {

using ::testing::HasSubstr;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small timeline: two cores' units, a chip-level track, a host stage, and counters.
void write_timeline(Sink& sink) {
  const TrackId mxu = sink.declare_track({TrackInfo::Kind::kUnit, 0, 0, "mxu0", ""});
  const TrackId dma = sink.declare_track({TrackInfo::Kind::kUnit, 0, 1, "dma0", ""});
  const TrackId ici = sink.declare_track({TrackInfo::Kind::kUnit, 1, -1, "links", ""});
  TrackInfo map{TrackInfo::Kind::kHost, -1, -1, "map", ""};
  map.threads = 4;
  const TrackId stage = sink.declare_track(map);
  const TrackId depth =
      sink.declare_track({TrackInfo::Kind::kCounter, 0, 0, "infeed_queue_depth", "entries"});
  sink.slice(mxu, "mxu.matmul", 1'000, 941'000);  // 1 ns .. 941 ns
  sink.slice(mxu, "mxu.matmul", 941'000, 2'000'000);
  sink.slice(dma, "dma.hbm_to_vmem", 0, 5'000'000);
  sink.slice(ici, "all_reduce \"ring\"", 7'000, 9'000);  // a name JSON must escape
  sink.slice(stage, "batch", 0, 3'000'000'000);
  sink.counter(depth, 0, 0);
  sink.counter(depth, 2'000, 2);
  sink.counter(depth, 4'000, 1.5);
}

void expect_timeline(const RecordingSink& r) {
  ASSERT_EQ(r.tracks().size(), 5u);
  EXPECT_EQ(r.tracks()[0].name, "mxu0");
  EXPECT_EQ(r.tracks()[1].core, 1);
  EXPECT_EQ(r.tracks()[2].chip, 1);
  EXPECT_EQ(r.tracks()[2].core, -1);
  EXPECT_EQ(r.tracks()[3].kind, TrackInfo::Kind::kHost);
  EXPECT_EQ(r.tracks()[3].threads, 4u);
  EXPECT_EQ(r.tracks()[3].name, "map");
  EXPECT_EQ(r.tracks()[4].kind, TrackInfo::Kind::kCounter);
  EXPECT_EQ(r.tracks()[4].unit, "entries");
  const auto mxu = r.slices_on(0, 0, "mxu0");
  ASSERT_EQ(mxu.size(), 2u);
  EXPECT_EQ(mxu[0].start, 1'000u);
  EXPECT_EQ(mxu[0].end, 941'000u);
  EXPECT_EQ(mxu[1].start, 941'000u);
  ASSERT_EQ(r.slices_on(1, -1, "links").size(), 1u);
  EXPECT_EQ(r.slices_on(1, -1, "links")[0].name, "all_reduce \"ring\"");
  ASSERT_EQ(r.slices_on(-1, -1, "map").size(), 1u);
  EXPECT_EQ(r.slices_on(-1, -1, "map")[0].end, 3'000'000'000u);
  ASSERT_EQ(r.samples().size(), 3u);
  EXPECT_EQ(r.samples()[1].time, 2'000u);
  EXPECT_DOUBLE_EQ(r.samples()[2].value, 1.5);
}

class TraceFormats : public ::testing::TestWithParam<const char*> {};

TEST_P(TraceFormats, WriteAndReadBackTheSameTimeline) {
  const std::string path = temp_path(std::string("timeline") + GetParam());
  auto writer = open_trace_writer(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  write_timeline(**writer);
  ASSERT_TRUE((*writer)->close().ok());
  EXPECT_EQ((*writer)->bytes_written(), std::filesystem::file_size(path));
  auto back = read_trace(path);
  ASSERT_TRUE(back.ok()) << back.status();
  expect_timeline(**back);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Extensions, TraceFormats,
                         ::testing::Values(".pftrace", ".perfetto-trace", ".json"));

// The whole file is one Perfetto Trace message: descriptors name processes and threads, and
// every slice begin has its end on the same track.
TEST(PerfettoTrace, DecodesWithPerfettosSchema) {
  const std::string path = temp_path("schema.pftrace");
  auto writer = open_trace_writer(path);
  ASSERT_TRUE(writer.ok());
  write_timeline(**writer);
  ASSERT_TRUE((*writer)->close().ok());
  perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(slurp(path)));
  std::map<std::string, int> processes;
  std::map<uint64_t, int> open;  // track -> slices open
  int threads = 0, counters = 0, begins = 0;
  for (const auto& p : trace.packet()) {
    if (p.has_track_descriptor()) {
      const auto& d = p.track_descriptor();
      if (d.has_process()) processes[d.process().process_name()] = d.process().pid();
      if (d.has_thread()) ++threads;
      if (d.has_counter()) ++counters;
      continue;
    }
    ASSERT_TRUE(p.has_track_event());
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    const auto& e = p.track_event();
    if (e.type() == perfetto::TrackEvent::TYPE_SLICE_BEGIN) {
      ++begins;
      ++open[e.track_uuid()];
    } else if (e.type() == perfetto::TrackEvent::TYPE_SLICE_END) {
      ASSERT_GT(open[e.track_uuid()], 0);
      --open[e.track_uuid()];
    }
  }
  EXPECT_EQ(processes.at("chip 0"), 2);
  EXPECT_EQ(processes.at("chip 1"), 3);
  EXPECT_EQ(processes.at("host"), 1);
  EXPECT_EQ(threads, 4);
  EXPECT_EQ(counters, 1);
  EXPECT_EQ(begins, 5);
  for (const auto& [track, n] : open) EXPECT_EQ(n, 0) << track;
  std::filesystem::remove(path);
}

// Chrome JSON parses; per track (pid, tid) the complete events never overlap, even where a
// unit reported spans that did (they are clamped to start where the previous one ended).
TEST(ChromeJsonTrace, ParsesAndNestsSlicesPerTrack) {
  const std::string path = temp_path("nesting.json");
  auto writer = open_trace_writer(path);
  ASSERT_TRUE(writer.ok());
  const TrackId mxu = (*writer)->declare_track({TrackInfo::Kind::kUnit, 0, 0, "mxu0", ""});
  (*writer)->slice(mxu, "a", 0, 10'000);
  (*writer)->slice(mxu, "b", 5'000, 20'000);   // overlaps a: written from 10 ns
  (*writer)->slice(mxu, "c", 12'000, 15'000);  // inside b: nothing left
  ASSERT_TRUE((*writer)->close().ok());
  const auto doc = nlohmann::json::parse(slurp(path));
  std::map<std::pair<int, int>, double> last_end;
  int slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++slices;
    const auto key = std::pair{e["pid"].get<int>(), e["tid"].get<int>()};
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    EXPECT_GE(dur, 0);
    if (last_end.count(key)) {
      EXPECT_GE(ts, last_end[key] - 1e-9);
    }
    last_end[key] = ts + dur;
  }
  EXPECT_EQ(slices, 2);
  auto back = read_trace(path);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ((*back)->slices().size(), 2u);
  EXPECT_EQ((*back)->slices()[1].start, 10'000u);
  std::filesystem::remove(path);
}

TEST(TraceFiles, BadFilesAreNamedWithWhereTheyGoWrong) {
  EXPECT_THAT(std::string(open_trace_writer("/tmp/t.txt").status().message()),
              HasSubstr(".pftrace or .perfetto-trace"));
  EXPECT_THAT(std::string(read_trace(temp_path("missing.pftrace")).status().message()),
              HasSubstr("cannot open"));

  // A Perfetto file cut in the middle of its last packet.
  const std::string path = temp_path("cut.pftrace");
  auto writer = open_trace_writer(path);
  ASSERT_TRUE(writer.ok());
  write_timeline(**writer);
  ASSERT_TRUE((*writer)->close().ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  auto cut = read_trace(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("at byte offset"));
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr(path));

  // Chrome JSON with an event on a track it never named.
  const std::string json = temp_path("orphan.json");
  std::ofstream(json)
      << R"({"traceEvents":[{"ph":"X","name":"x","pid":2,"tid":9,"ts":1,"dur":1}]})";
  auto orphan = read_trace(json);
  ASSERT_FALSE(orphan.ok());
  EXPECT_THAT(std::string(orphan.status().message()), HasSubstr("traceEvents[0]"));
  std::ofstream(json) << "{not json";
  EXPECT_THAT(
      std::string(read_trace(json).status().message()),
      HasSubstr(": not valid JSON at byte offset 2: syntax error while parsing object key"));
  // 45 MB of '[' grew to 3.4 GB before "not valid JSON": nesting is bounded as it is parsed.
  std::ofstream(json) << R"({"traceEvents":[{"args":)" << std::string(1 << 20, '[');
  EXPECT_THAT(std::string(read_trace(json).status().message()),
              HasSubstr(": arrays and objects nested more than 64 deep (a trace's events nest "
                        "four levels)"));
  // Found by fuzz_trace (2026-12-03): a number past double's range threw out of the parse
  // (out_of_range, not a parse_error) and ended the process.
  std::ofstream(json) << R"({"traceEvents":[{"ts":4E444}]})";
  EXPECT_THAT(std::string(read_trace(json).status().message()),
              HasSubstr(": not valid JSON: number overflow parsing '4E444'"));
  // A field of another type is named, not the JSON library's wording alone.
  std::ofstream(json) << R"({"traceEvents":[{"ph":5,"pid":1,"tid":1}]})";
  EXPECT_THAT(std::string(read_trace(json).status().message()),
              HasSubstr("traceEvents[0]: \"ph\": type must be string, but is number"));
  // Found by fuzz_trace: a thread_name event without "args" read freed memory (a const
  // operator[] on a missing key); every field is now read with at() and named when missing.
  std::ofstream(json) << R"({"traceEvents":[{"ph":"M","name":"thread_name","pid":1,"tid":1}]})";
  EXPECT_THAT(std::string(read_trace(json).status().message()),
              HasSubstr("traceEvents[0]: no \"args.name\""));
  // Found by fuzz_trace: a tid of 10^70 converted to int (undefined behaviour).
  std::ofstream(json) << R"({"traceEvents":[{"ph":"M","name":"x","pid":1,"tid":1e70}]})";
  EXPECT_THAT(std::string(read_trace(json).status().message()),
              HasSubstr("traceEvents[0]: \"tid\": 1e+70 is not an id"));
  std::filesystem::remove(path);
  std::filesystem::remove(json);
}

// The router declares every track it saw in a target attached later, and forwards only while
// attached; the tee switches one output off without losing track ids.
TEST(TraceRouter, ReplaysTracksIntoALateTargetAndForwardsOnlyWhileAttached) {
  TraceRouter router;
  const TrackId early = router.declare_track({TrackInfo::Kind::kUnit, 0, 0, "vpu", ""});
  router.slice(early, "lost", 0, 1);  // nobody attached
  RecordingSink all, some;
  TeeSink tee;
  tee.add(&all);
  const size_t second = tee.add(&some);
  router.attach(&tee);
  const TrackId late = router.declare_track({TrackInfo::Kind::kUnit, 0, 0, "mxu0", ""});
  router.slice(early, "vpu.add", 10, 20);
  tee.set_enabled(second, false);
  router.slice(late, "mxu.matmul", 30, 40);
  router.detach();
  router.slice(late, "after", 50, 60);
  ASSERT_EQ(all.tracks().size(), 2u);
  ASSERT_EQ(some.tracks().size(), 2u);
  ASSERT_EQ(all.slices().size(), 2u);
  EXPECT_EQ(all.slices()[1].name, "mxu.matmul");
  EXPECT_EQ(all.track(all.slices()[1].track).name, "mxu0");
  ASSERT_EQ(some.slices().size(), 1u);
  EXPECT_EQ(some.slices()[0].name, "vpu.add");
}

}  // namespace trace_files_test
}  // namespace tpusim::traces
