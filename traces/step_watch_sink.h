#pragma once
// Calls back as the device finishes steps: watches the first core's "steps" track (one
// "step G" slice per device-loop iteration, G the global step it completes) and hands G on.
// The estimator tees it into the device timeline so that `tpusim train` can draw a progress
// bar that moves within a device loop.

#include <cstdint>
#include <functional>
#include <optional>

#include "traces/sink.h"

namespace tpusim::traces {

class StepWatchSink final : public Sink {
 public:
  explicit StepWatchSink(std::function<void(int64_t)> on_step) : on_step_(std::move(on_step)) {}

  TrackId declare_track(const TrackInfo& info) override;
  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override;
  void counter(TrackId, TimePs, double) override {}

 private:
  std::function<void(int64_t)> on_step_;
  uint32_t next_ = 0;
  std::optional<TrackId> steps_;  // chip 0, core 0's steps track
};

}  // namespace tpusim::traces
