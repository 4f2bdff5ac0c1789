#pragma once
// Keeps the slices of each track properly nested for formats that pair begin and end events:
// units report spans that may touch or (for pipelined units) overlap the previous one; a span is
// clamped to start where the track's previous one ended.

#include <cstdint>
#include <vector>

#include "traces/sink.h"

namespace tpusim::traces {

class SliceClamp {
 public:
  // The [start, end) to write for a span on `track`; false when nothing of it is left.
  bool clamp(TrackId track, TimePs* start, TimePs* end) {
    const auto i = static_cast<size_t>(track);
    if (i >= last_end_.size()) last_end_.resize(i + 1, 0);
    if (*start < last_end_[i]) *start = last_end_[i];
    if (*end < *start) return false;
    last_end_[i] = *end;
    return true;
  }

 private:
  std::vector<TimePs> last_end_;
};

}  // namespace tpusim::traces
