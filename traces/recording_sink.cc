#include "traces/recording_sink.h"

#include "traces/analysis_events.h"

namespace tpusim::traces {

TrackId RecordingSink::declare_track(const TrackInfo& info) {
  tracks_.push_back(info);
  return static_cast<TrackId>(tracks_.size() - 1);
}

void RecordingSink::slice(TrackId track, std::string_view name, TimePs start, TimePs end) {
  if (analysis_only_) {
    if (!analyzer_reads(tracks_[static_cast<size_t>(track)], name)) return;
  }
  slices_.push_back(Slice{track, std::string(name), start, end});
}

void RecordingSink::counter(TrackId track, TimePs time, double value) {
  if (analysis_only_) return;
  samples_.push_back(Sample{track, time, value});
}

std::vector<RecordingSink::Slice> RecordingSink::slices_on(int chip, int core,
                                                           const std::string& name) const {
  std::vector<Slice> out;
  for (const Slice& s : slices_) {
    const TrackInfo& info = track(s.track);
    if (info.chip == chip && info.core == core && info.name == name) out.push_back(s);
  }
  return out;
}

}  // namespace tpusim::traces
