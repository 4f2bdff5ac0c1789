#pragma once
// A core's busy track: where any of its compute units (DMA engines, MXUs, vector unit) has an
// instruction in progress, each from its start until its results land (a vector op's pipeline
// latency and an MXU's drain included, so the bubbles between dependent instructions are work).
// Spans merge as they come into runs; a run goes to the sink as one "busy" slice when a span
// starts after it ends, or at flush() (a step's end). The step analyzer reads these runs to tell
// a collective that runs under the core's own work from one the core waits for, without an event
// per instruction.

#include <algorithm>

#include "traces/analysis_events.h"
#include "traces/sink.h"

namespace tpusim::sim {

class BusyTrack {
 public:
  BusyTrack() = default;
  BusyTrack(traces::Sink* sink, traces::TrackId track) : sink_(sink), track_(track) {}

  bool recording() const { return sink_ != nullptr && sink_->recording(); }

  // An instruction in progress over [start, end) picoseconds. Spans come roughly in start order
  // (each when its unit begins it); one that ends before the open run starts is reported alone.
  void add(traces::TimePs start, traces::TimePs end) {
    if (!recording() || end <= start) return;
    if (!open_) {
      open(start, end);
    } else if (start <= end_ && end >= start_) {
      start_ = std::min(start_, start);
      end_ = std::max(end_, end);
    } else if (start > end_) {
      flush();
      open(start, end);
    } else {
      sink_->slice(track_, traces::kBusySlice, start, end);
    }
  }

  // Reports the open run, if any.
  void flush() {
    if (!open_) return;
    open_ = false;
    if (recording()) sink_->slice(track_, traces::kBusySlice, start_, end_);
  }

 private:
  void open(traces::TimePs start, traces::TimePs end) {
    open_ = true;
    start_ = start;
    end_ = end;
  }

  traces::Sink* sink_ = nullptr;
  traces::TrackId track_{};
  bool open_ = false;
  traces::TimePs start_ = 0, end_ = 0;  // the open run
};

}  // namespace tpusim::sim
