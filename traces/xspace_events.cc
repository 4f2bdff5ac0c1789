#include "traces/xspace_events.h"

#include <charconv>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "common/strings.h"

namespace tpusim::traces {
namespace {

// The latest time a profile's event may end: 10^15 ps, 1,000 s (a trace's bound, in ps).
constexpr int64_t kMaxProfilePs = 1'000'000'000'000'000;

}  // namespace

absl::StatusOr<std::pair<TimePs, TimePs>> event_span(const xprof::XLine& line,
                                                     const xprof::XEvent& e,
                                                     const std::string& where) {
  // An aggregated event (XEvent's num_occurrences in place of offset_ps) has no time of its own:
  // read as a span it would sit at the line's start.
  if (e.data_case() == xprof::XEvent::kNumOccurrences) {
    return absl::InvalidArgumentError(str_cat(where, ": an aggregated event (",
                                              e.num_occurrences(),
                                              " occurrences, no offset) where a timed one is due"));
  }
  const int64_t line_ps = line.timestamp_ns() * 1000;
  if (line.timestamp_ns() < 0 || line.timestamp_ns() > kMaxProfilePs / 1000 || e.offset_ps() < 0 ||
      e.duration_ps() < 0 || e.offset_ps() > kMaxProfilePs || e.duration_ps() > kMaxProfilePs ||
      line_ps + e.offset_ps() + e.duration_ps() > kMaxProfilePs) {
    return absl::InvalidArgumentError(
        str_cat(where, ": an event at ", e.offset_ps(), " ps for ", e.duration_ps(),
                " ps on a line at ", line.timestamp_ns(), " ns is not within [0, 10^15] ps"));
  }
  const TimePs start = static_cast<TimePs>(line_ps + e.offset_ps());
  return std::pair<TimePs, TimePs>{start, start + static_cast<TimePs>(e.duration_ps())};
}

absl::StatusOr<const xprof::XEventMetadata*> event_metadata(const xprof::XPlane& plane,
                                                            const xprof::XEvent& e,
                                                            const std::string& where) {
  auto it = plane.event_metadata().find(e.metadata_id());
  if (it == plane.event_metadata().end()) {
    return absl::InvalidArgumentError(
        str_cat(where, ": an event names metadata ", e.metadata_id(), ", which the plane lacks"));
  }
  return &it->second;
}

std::string stat_name(const xprof::XPlane& plane, const xprof::XStat& s) {
  auto it = plane.stat_metadata().find(s.metadata_id());
  return it == plane.stat_metadata().end() ? std::string() : it->second.name();
}

std::optional<std::string> stat_string(const xprof::XPlane& plane, const xprof::XStat& s) {
  if (s.value_case() == xprof::XStat::kStrValue) return s.str_value();
  if (s.value_case() != xprof::XStat::kRefValue ||
      s.ref_value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  auto it = plane.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
  if (it == plane.stat_metadata().end()) return std::nullopt;
  return it->second.name();
}

std::optional<int64_t> stat_int(const xprof::XStat& s) {
  if (s.value_case() == xprof::XStat::kInt64Value) return s.int64_value();
  if (s.value_case() == xprof::XStat::kUint64Value &&
      s.uint64_value() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(s.uint64_value());
  }
  return std::nullopt;
}

std::optional<double> stat_double(const xprof::XStat& s) {
  switch (s.value_case()) {
    case xprof::XStat::kDoubleValue:
      return s.double_value();
    case xprof::XStat::kInt64Value:
      return static_cast<double>(s.int64_value());
    case xprof::XStat::kUint64Value:
      return static_cast<double>(s.uint64_value());
    default:
      return std::nullopt;
  }
}

const xprof::XStat* find_stat(const xprof::XPlane& plane,
                              const google::protobuf::RepeatedPtrField<xprof::XStat>& stats,
                              const std::string& name) {
  for (const xprof::XStat& s : stats) {
    if (stat_name(plane, s) == name) return &s;
  }
  return nullptr;
}

std::optional<int64_t> parse_step_number(const std::string& text) {
  int64_t step = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
  if (ec != std::errc() || ptr != text.data() + text.size() || step < 0) return std::nullopt;
  return step;
}

absl::Status visit_device_events(const xprof::XPlane& plane, const std::string& where,
                                 const DeviceEventVisitor& visit) {
  std::set<int64_t> steps_seen;
  for (const xprof::XLine& line : plane.lines()) {
    const bool is_steps = line.name() == "Steps", is_ops = line.name() == "XLA Ops";
    if (!is_steps && !is_ops) continue;
    const std::string at = str_cat(where, ", line '", line.name(), "'");
    std::set<std::tuple<int64_t, TimePs, TimePs>> ops_seen;
    for (const xprof::XEvent& e : line.events()) {
      auto m = event_metadata(plane, e, at);
      if (!m.ok()) return m.status();
      auto span = event_span(line, e, at);
      if (!span.ok()) return span.status();
      if (is_ops) {
        if (!ops_seen.insert({e.metadata_id(), span->first, span->second}).second) {
          return absl::InvalidArgumentError(
              str_cat(at, ": op '", (*m)->name(), "' runs twice at the same offset and duration (",
                      span->first, " ps): the profile is not one run's"));
        }
        visit.op(**m, *span);
        continue;
      }
      const std::optional<int64_t> step = parse_step_number((*m)->name());
      if (!step) {
        return absl::InvalidArgumentError(
            str_cat(at, ": a step named '", (*m)->name(), "', not a step number"));
      }
      if (!steps_seen.insert(*step).second) {
        return absl::InvalidArgumentError(
            str_cat(at, ": step ", *step, " appears twice: the profile is not one run's"));
      }
      if (span->second <= span->first) {
        return absl::InvalidArgumentError(str_cat(at, ": step ", *step, " lasts no time"));
      }
      visit.step(*step, *span);
    }
  }
  return absl::OkStatus();
}

absl::Status visit_host_steps(
    const xprof::XPlane& plane, const std::string& where,
    const std::function<void(int64_t step, std::pair<TimePs, TimePs> span)>& visit) {
  for (const xprof::XLine& line : plane.lines()) {
    const std::string at = str_cat(where, ", line '", line.name(), "'");
    for (const xprof::XEvent& e : line.events()) {
      const xprof::XStat* stat = find_stat(plane, e.stats(), "step_num");
      if (stat == nullptr) continue;
      const std::optional<int64_t> step = stat_int(*stat);
      if (!step || *step < 0) {
        return absl::InvalidArgumentError(str_cat(at, ": a step_num that is no step number"));
      }
      auto span = event_span(line, e, at);
      if (!span.ok()) return span.status();
      visit(*step, *span);
    }
  }
  return absl::OkStatus();
}

absl::Status check_plane_names(const xprof::XSpace& space, const std::string& path) {
  std::map<std::string, int> first;
  for (int p = 0; p < space.planes_size(); ++p) {
    const auto [at, fresh] = first.emplace(space.planes(p).name(), p);
    if (!fresh) {
      return absl::InvalidArgumentError(
          str_cat(path, ": plane ", p, " '", at->first, "' repeats plane ", at->second,
                  "'s name: a profile holds one plane per device and host (two merged?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::traces
