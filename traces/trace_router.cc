#include "traces/trace_router.h"

namespace tpusim::traces {

void TraceRouter::attach(Sink* target) {
  target_ = target;
  mapped_.clear();
  if (target_ == nullptr) return;
  mapped_.reserve(tracks_.size());
  for (const TrackInfo& info : tracks_) mapped_.push_back(target_->declare_track(info));
}

TrackId TraceRouter::declare_track(const TrackInfo& info) {
  tracks_.push_back(info);
  if (target_ != nullptr) mapped_.push_back(target_->declare_track(info));
  return static_cast<TrackId>(tracks_.size() - 1);
}

void TraceRouter::slice(TrackId track, std::string_view name, TimePs start, TimePs end) {
  if (target_ != nullptr) target_->slice(mapped_[static_cast<size_t>(track)], name, start, end);
}

void TraceRouter::counter(TrackId track, TimePs time, double value) {
  if (target_ != nullptr) target_->counter(mapped_[static_cast<size_t>(track)], time, value);
}

}  // namespace tpusim::traces
