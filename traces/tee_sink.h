#pragma once
// Hands every event to several sinks, each of which can be switched off and on: tracks are
// always declared in all of them (so ids stay valid), slices and counters reach only the
// enabled ones. The estimator tees the device timeline into the step analysis (always) and into
// a trace file (for the steps --trace-steps names).

#include <vector>

#include "traces/sink.h"

namespace tpusim::traces {

class TeeSink final : public Sink {
 public:
  // Adds `sink` (not owned), enabled; returns its index for set_enabled.
  size_t add(Sink* sink);
  void set_enabled(size_t index, bool enabled) { outputs_.at(index).enabled = enabled; }

  TrackId declare_track(const TrackInfo& info) override;
  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override;
  void counter(TrackId track, TimePs time, double value) override;

 private:
  struct Output {
    Sink* sink;
    bool enabled;
    std::vector<TrackId> ids;  // ours -> its
  };
  std::vector<Output> outputs_;
  std::vector<TrackInfo> tracks_;
};

}  // namespace tpusim::traces
