#include "traces/xprof_sink.h"

#include <algorithm>
#include <charconv>

#include "traces/analysis_events.h"

namespace tpusim::traces {

TrackId XprofDeviceSink::declare_track(const TrackInfo& info) {
  const auto id = static_cast<TrackId>(next_++);
  std::optional<Track> track;
  if (info.kind == TrackInfo::Kind::kHost && info.name == kHostLoopTrack) {
    track = Track{Track::Kind::kRoundTrips, 0};
  } else if (info.kind == TrackInfo::Kind::kUnit && info.chip >= 0 && info.core >= 0 &&
             (info.name == kStepsTrack || info.name == kInfeedTrack)) {
    track = Track{
        info.name == kStepsTrack ? Track::Kind::kSteps : Track::Kind::kInfeed,
        static_cast<uint32_t>(info.chip) * cores_per_chip_ + static_cast<uint32_t>(info.core)};
  }
  tracks_.push_back(track);
  return id;
}

void XprofDeviceSink::slice(TrackId id, std::string_view name, TimePs start, TimePs end) {
  const auto index = static_cast<size_t>(id);
  if (index >= tracks_.size() || !tracks_[index]) return;
  const Track& track = *tracks_[index];
  switch (track.kind) {
    case Track::Kind::kRoundTrips:
      round_trips_.push_back({start, end});
      return;
    case Track::Kind::kInfeed:
      if (name == kInfeedWait) waits_[track.core].push_back({start, end});
      return;
    case Track::Kind::kSteps:
      break;
  }
  constexpr std::string_view kPrefix = "step ";
  if (name.substr(0, kPrefix.size()) != kPrefix) return;
  int64_t step = 0;
  const char* first = name.data() + kPrefix.size();
  const auto [last, error] = std::from_chars(first, name.data() + name.size(), step);
  if (error != std::errc() || last != name.data() + name.size()) return;
  steps_[track.core][step] = {start, end};
}

std::map<uint32_t, std::map<int64_t, XprofSpan>> XprofDeviceSink::steps() const {
  std::vector<XprofSpan> trips = round_trips_;
  std::sort(trips.begin(), trips.end(),
            [](const XprofSpan& a, const XprofSpan& b) { return a.start < b.start; });
  std::map<uint32_t, std::map<int64_t, XprofSpan>> out = steps_;
  for (auto& [core, steps] : out) {
    for (auto it = steps.begin(); it != steps.end(); ++it) {
      const auto next = std::next(it);
      XprofSpan& span = it->second;
      if (next != steps.end() && next->first == it->first + 1 && next->second.start >= span.end) {
        span.end = next->second.start;
        continue;
      }
      const auto trip =
          std::lower_bound(trips.begin(), trips.end(), span.end,
                           [](const XprofSpan& t, TimePs at) { return t.start < at; });
      if (trip != trips.end() && (next == steps.end() || trip->end <= next->second.start))
        span.end = std::max(span.end, trip->end);
    }
  }
  return out;
}

}  // namespace tpusim::traces
