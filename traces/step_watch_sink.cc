#include "traces/step_watch_sink.h"

#include <charconv>

#include "traces/analysis_events.h"

namespace tpusim::traces {

TrackId StepWatchSink::declare_track(const TrackInfo& info) {
  const auto id = static_cast<TrackId>(next_++);
  if (!steps_ && info.kind == TrackInfo::Kind::kUnit && info.chip == 0 && info.core == 0 &&
      info.name == kStepsTrack) {
    steps_ = id;
  }
  return id;
}

void StepWatchSink::slice(TrackId track, std::string_view name, TimePs, TimePs) {
  if (!steps_ || track != *steps_) return;
  constexpr std::string_view kPrefix = "step ";
  if (name.substr(0, kPrefix.size()) != kPrefix) return;
  int64_t step = 0;
  const char* first = name.data() + kPrefix.size();
  const auto [end, error] = std::from_chars(first, name.data() + name.size(), step);
  if (error == std::errc() && end == name.data() + name.size()) on_step_(step);
}

}  // namespace tpusim::traces
