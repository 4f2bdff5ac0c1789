#include "traces/xspace_reader.h"

#include <charconv>
#include <map>

#include "common/input_file.h"
#include "common/strings.h"
#include "traces/analysis_events.h"
#include "traces/xplane.pb.h"

namespace tpusim::traces {
namespace {

constexpr std::string_view kDevicePrefix = "/device:TPU:";
constexpr std::string_view kHostPlane = "/host:CPU";
constexpr std::string_view kThreadInfix = " thread ";
// The latest time a profile's event may end: 10^15 ps, 1,000 s (a trace's bound, in ps).
constexpr int64_t kMaxProfilePs = 1'000'000'000'000'000;

// An event's [start, end) in ps from the profile's start, or an error naming it.
absl::StatusOr<std::pair<TimePs, TimePs>> span_of(const xprof::XLine& line, const xprof::XEvent& e,
                                                  const std::string& where) {
  const int64_t line_ps = line.timestamp_ns() * 1000;
  if (line.timestamp_ns() < 0 || line.timestamp_ns() > kMaxProfilePs / 1000 || e.offset_ps() < 0 ||
      e.duration_ps() < 0 || e.offset_ps() > kMaxProfilePs || e.duration_ps() > kMaxProfilePs ||
      line_ps + e.offset_ps() + e.duration_ps() > kMaxProfilePs) {
    return absl::InvalidArgumentError(
        str_cat(where, ": an event at ", e.offset_ps(), " ps for ", e.duration_ps(),
                " ps on a line at ", line.timestamp_ns(), " ns is not within [0, 10^15] ps"));
  }
  const TimePs start = line_ps + e.offset_ps();
  return std::pair<TimePs, TimePs>{start, start + e.duration_ps()};
}

// The metadata an event names, or an error naming the event.
absl::StatusOr<const xprof::XEventMetadata*> metadata_of(const xprof::XPlane& plane,
                                                         const xprof::XEvent& e,
                                                         const std::string& where) {
  auto it = plane.event_metadata().find(e.metadata_id());
  if (it == plane.event_metadata().end()) {
    return absl::InvalidArgumentError(
        str_cat(where, ": an event names metadata ", e.metadata_id(), ", which the plane lacks"));
  }
  return &it->second;
}

// The metadata's string stat `name` ("" when it has none).
std::string str_stat(const xprof::XPlane& plane, const xprof::XEventMetadata& m,
                     std::string_view name) {
  for (const xprof::XStat& s : m.stats()) {
    auto it = plane.stat_metadata().find(s.metadata_id());
    if (it != plane.stat_metadata().end() && it->second.name() == name) return s.str_value();
  }
  return "";
}

absl::Status read_device_plane(const xprof::XPlane& plane, int core, const std::string& where,
                               RecordingSink* out) {
  const TrackId steps =
      out->declare_track({TrackInfo::Kind::kUnit, core, 0, std::string(kStepsTrack), "", 0});
  const TrackId infeed =
      out->declare_track({TrackInfo::Kind::kUnit, core, 0, std::string(kInfeedTrack), "", 0});
  for (const xprof::XLine& line : plane.lines()) {
    const bool is_steps = line.name() == "Steps", is_ops = line.name() == "XLA Ops";
    if (!is_steps && !is_ops) continue;
    const std::string at = str_cat(where, ", line '", line.name(), "'");
    for (const xprof::XEvent& e : line.events()) {
      auto m = metadata_of(plane, e, at);
      if (!m.ok()) return m.status();
      auto span = span_of(line, e, at);
      if (!span.ok()) return span.status();
      if (is_steps) {
        int64_t step = 0;
        const std::string& name = (*m)->name();
        const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), step);
        if (ec != std::errc() || ptr != name.data() + name.size() || step < 0) {
          return absl::InvalidArgumentError(
              str_cat(at, ": a step named '", name, "', not a step number"));
        }
        out->slice(steps, str_cat("step ", step), span->first, span->second);
      } else if (str_stat(plane, **m, "hlo_category") == "infeed") {
        out->slice(infeed, kInfeedWait, span->first, span->second);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status read_host_plane(const xprof::XPlane& plane, const std::string& where,
                             RecordingSink* out) {
  std::map<std::string, std::vector<const xprof::XLine*>> stages;  // in first-line order below
  std::vector<std::string> order;
  for (const xprof::XLine& line : plane.lines()) {
    const size_t infix = line.name().rfind(kThreadInfix);
    if (infix == std::string::npos || infix == 0) continue;
    const std::string stage = line.name().substr(0, infix);
    if (stages[stage].empty()) order.push_back(stage);
    stages[stage].push_back(&line);
  }
  for (const std::string& stage : order) {
    const auto& lines = stages[stage];
    const TrackId track = out->declare_track(
        {TrackInfo::Kind::kHost, -1, -1, stage, "", static_cast<uint32_t>(lines.size())});
    for (const xprof::XLine* line : lines) {
      const std::string at = str_cat(where, ", line '", line->name(), "'");
      for (const xprof::XEvent& e : line->events()) {
        auto span = span_of(*line, e, at);
        if (!span.ok()) return span.status();
        out->slice(track, "batch", span->first, span->second);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool is_xspace_path(const std::string& path) {
  constexpr std::string_view kSuffix = ".xplane.pb";
  return path.size() >= kSuffix.size() &&
         path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

absl::StatusOr<std::unique_ptr<RecordingSink>> read_xspace(const std::string& path) {
  auto bytes = read_input_file(path, "profile", UINT64_MAX);
  if (!bytes.ok()) return bytes.status();
  xprof::XSpace space;
  if (!space.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(
        str_cat(path, ": not an XSpace (XProf's profile message does not parse)"));
  }
  auto out = std::make_unique<RecordingSink>();
  out->keep_only_analysis_events();
  int devices = 0;
  for (int p = 0; p < space.planes_size(); ++p) {
    const xprof::XPlane& plane = space.planes(p);
    const std::string where = str_cat(path, ": plane ", p, " '", plane.name(), "'");
    if (plane.name().rfind(kDevicePrefix, 0) == 0) {
      const std::string number = plane.name().substr(kDevicePrefix.size());
      int core = 0;
      const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), core);
      if (ec != std::errc() || ptr != number.data() + number.size() || core < 0 || core > 1 << 20) {
        return absl::InvalidArgumentError(str_cat(where, ": no device number"));
      }
      if (auto s = read_device_plane(plane, core, where, out.get()); !s.ok()) return s;
      ++devices;
    } else if (plane.name() == kHostPlane) {
      if (auto s = read_host_plane(plane, where, out.get()); !s.ok()) return s;
    }
  }
  if (devices == 0) {
    return absl::InvalidArgumentError(
        str_cat(path, ": no /device:TPU:N plane; the step analysis needs a TPU's steps"));
  }
  return out;
}

}  // namespace tpusim::traces
