#pragma once
// A Sink that stands between producers that declare their tracks once, early (the simulator's
// units, at elaboration), and a consumer that comes and goes (a trace file for the steps a user
// asked to record). It remembers every track; attach() declares them all in the new target and
// forwards events from then on, detach() stops. With no target an event costs one branch.

#include <vector>

#include "traces/sink.h"

namespace tpusim::traces {

class TraceRouter final : public Sink {
 public:
  // Forwards to `target` (not owned) from now on; nullptr detaches.
  void attach(Sink* target);
  void detach() { attach(nullptr); }
  bool attached() const { return target_ != nullptr; }

  TrackId declare_track(const TrackInfo& info) override;
  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override;
  void counter(TrackId track, TimePs time, double value) override;
  bool recording() const override { return target_ != nullptr; }

  const std::vector<TrackInfo>& tracks() const { return tracks_; }

 private:
  Sink* target_ = nullptr;
  std::vector<TrackInfo> tracks_;
  std::vector<TrackId> mapped_;  // our id -> the target's
};

}  // namespace tpusim::traces
