#include "traces/counter_binning_sink.h"

#include <algorithm>

namespace tpusim::traces {

CounterBinningSink::CounterBinningSink(Sink* target, TimePs window)
    : target_(target), window_(std::max<TimePs>(window, 1)) {}

bool CounterBinningSink::is_rate(const TrackInfo& info) {
  const std::string& u = info.unit;
  return info.kind == TrackInfo::Kind::kCounter &&
         (u == "fraction" || (u.size() > 2 && u.compare(u.size() - 2, 2, "/s") == 0));
}

TrackId CounterBinningSink::declare_track(const TrackInfo& info) {
  const TrackId id = target_->declare_track(info);
  const auto index = static_cast<size_t>(id);
  if (tracks_.size() <= index) tracks_.resize(index + 1);
  tracks_[index].binned = is_rate(info);
  return id;
}

void CounterBinningSink::slice(TrackId track, std::string_view name, TimePs start, TimePs end) {
  target_->slice(track, name, start, end);
}

void CounterBinningSink::send(TrackId track, Binned& b, TimePs time, double value) {
  if (b.any_sent && value == b.sent) return;
  target_->counter(track, time, value);
  b.sent = value;
  b.any_sent = true;
}

void CounterBinningSink::advance(TrackId track, Binned& b, TimePs time) {
  while (time >= b.window_start + window_) {
    const TimePs end = b.window_start + window_;
    b.integral += b.value * static_cast<double>(end - b.since);
    send(track, b, b.window_start, b.integral / static_cast<double>(window_));
    b.window_start = end;
    b.since = end;
    b.integral = 0;
    if (time >= b.window_start + window_) {  // whole windows at one value
      send(track, b, b.window_start, b.value);
      b.window_start += (time - b.window_start) / window_ * window_;
      b.since = b.window_start;
    }
  }
  b.integral += b.value * static_cast<double>(time - b.since);
  b.since = time;
}

void CounterBinningSink::counter(TrackId track, TimePs time, double value) {
  const auto index = static_cast<size_t>(track);
  if (index >= tracks_.size() || !tracks_[index].binned) {
    target_->counter(track, time, value);
    return;
  }
  Binned& b = tracks_[index];
  if (!b.started) {
    b.started = true;
    b.window_start = time / window_ * window_;
    b.since = b.window_start;  // 0 before the first sample
  }
  advance(track, b, std::max(time, b.since));
  b.value = value;
}

void CounterBinningSink::flush() {
  for (size_t i = 0; i < tracks_.size(); ++i) {
    Binned& b = tracks_[i];
    if (!b.binned || !b.started) continue;
    const auto track = static_cast<TrackId>(i);
    if (b.since > b.window_start) {
      send(track, b, b.window_start, b.integral / static_cast<double>(b.since - b.window_start));
    }
    send(track, b, b.since, b.value);
    b.started = false;
    b.integral = 0;
  }
}

}  // namespace tpusim::traces
