#include "traces/xspace_reader.h"

#include <charconv>
#include <map>

#include "common/strings.h"
#include "traces/analysis_events.h"
#include "traces/xplane.pb.h"
#include "traces/xspace_events.h"
#include "traces/xspace_ops.h"

namespace tpusim::traces {
namespace {

constexpr std::string_view kThreadInfix = " thread ";

// The metadata's string stat `name` ("" when it has none).
std::string str_stat(const xprof::XPlane& plane, const xprof::XEventMetadata& m,
                     const std::string& name) {
  const xprof::XStat* s = find_stat(plane, m.stats(), name);
  return s == nullptr ? std::string() : stat_string(plane, *s).value_or("");
}

absl::Status read_device_plane(const xprof::XPlane& plane, int core, const std::string& where,
                               RecordingSink* out) {
  const TrackId steps =
      out->declare_track({TrackInfo::Kind::kUnit, core, 0, std::string(kStepsTrack), "", 0});
  const TrackId infeed =
      out->declare_track({TrackInfo::Kind::kUnit, core, 0, std::string(kInfeedTrack), "", 0});
  return visit_device_events(plane, where,
                             {[&](int64_t step, std::pair<TimePs, TimePs> span) {
                                out->slice(steps, str_cat("step ", step), span.first, span.second);
                              },
                              [&](const xprof::XEventMetadata& op, std::pair<TimePs, TimePs> span) {
                                if (str_stat(plane, op, "hlo_category") == "infeed") {
                                  out->slice(infeed, kInfeedWait, span.first, span.second);
                                }
                              }});
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
        auto span = event_span(*line, e, at);
        if (!span.ok()) return span.status();
        out->slice(track, "batch", span->first, span->second);
      }
    }
  }
  return absl::OkStatus();
}

// A host-only profile (XLA on the CPU): the host plane's events with a step_num stat (as
// StepTraceAnnotation writes them) as core 0's steps. Returns how many it read.
absl::StatusOr<int64_t> read_host_steps(const xprof::XPlane& plane, const std::string& where,
                                        RecordingSink* out) {
  const TrackId steps =
      out->declare_track({TrackInfo::Kind::kUnit, 0, 0, std::string(kStepsTrack), "", 0});
  int64_t read = 0;
  const absl::Status visited =
      visit_host_steps(plane, where, [&](int64_t step, std::pair<TimePs, TimePs> span) {
        out->slice(steps, str_cat("step ", step), span.first, span.second);
        ++read;
      });
  if (!visited.ok()) return visited;
  return read;
}

}  // namespace

bool is_xspace_path(const std::string& path) {
  constexpr std::string_view kSuffix = ".xplane.pb";
  return path.size() >= kSuffix.size() &&
         path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

absl::StatusOr<std::unique_ptr<RecordingSink>> read_xspace(const std::string& path) {
  auto parsed = parse_xspace_file(path);
  if (!parsed.ok()) return parsed.status();
  return analysis_events_of(*parsed, path);
}

absl::StatusOr<std::unique_ptr<RecordingSink>> analysis_events_of(const xprof::XSpace& space,
                                                                  const std::string& path) {
  if (absl::Status s = check_plane_names(space, path); !s.ok()) return s;
  auto out = std::make_unique<RecordingSink>();
  out->keep_only_analysis_events();
  int devices = 0;
  const xprof::XPlane* host = nullptr;
  std::string host_where;
  for (int p = 0; p < space.planes_size(); ++p) {
    const xprof::XPlane& plane = space.planes(p);
    const std::string where = str_cat(path, ": plane ", p, " '", plane.name(), "'");
    if (plane.name().rfind(kTpuPlanePrefix, 0) == 0) {
      const std::string number = plane.name().substr(kTpuPlanePrefix.size());
      int core = 0;
      const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), core);
      if (ec != std::errc() || ptr != number.data() + number.size() || core < 0 || core > 1 << 20) {
        return absl::InvalidArgumentError(str_cat(where, ": no device number"));
      }
      if (auto s = read_device_plane(plane, core, where, out.get()); !s.ok()) return s;
      ++devices;
    } else if (plane.name() == kHostPlaneName) {
      if (auto s = read_host_plane(plane, where, out.get()); !s.ok()) return s;
      host = &plane;
      host_where = where;
    }
  }
  if (devices > 0) return out;
  int64_t host_steps = 0;
  if (host != nullptr) {
    auto steps = read_host_steps(*host, host_where, out.get());
    if (!steps.ok()) return steps.status();
    host_steps = *steps;
  }
  if (host_steps == 0) {
    return absl::InvalidArgumentError(
        str_cat(path,
                ": no /device:TPU:N plane and no host event with a step_num stat; the step "
                "analysis needs a device's steps"));
  }
  return out;
}

}  // namespace tpusim::traces
