#include "traces/tee_sink.h"

namespace tpusim::traces {

size_t TeeSink::add(Sink* sink) {
  Output out{sink, true, {}};
  for (const TrackInfo& info : tracks_) out.ids.push_back(sink->declare_track(info));
  outputs_.push_back(std::move(out));
  return outputs_.size() - 1;
}

TrackId TeeSink::declare_track(const TrackInfo& info) {
  tracks_.push_back(info);
  for (Output& o : outputs_) o.ids.push_back(o.sink->declare_track(info));
  return static_cast<TrackId>(tracks_.size() - 1);
}

void TeeSink::slice(TrackId track, std::string_view name, TimePs start, TimePs end) {
  for (Output& o : outputs_) {
    if (o.enabled) o.sink->slice(o.ids[static_cast<size_t>(track)], name, start, end);
  }
}

void TeeSink::counter(TrackId track, TimePs time, double value) {
  for (Output& o : outputs_) {
    if (o.enabled) o.sink->counter(o.ids[static_cast<size_t>(track)], time, value);
  }
}

}  // namespace tpusim::traces
