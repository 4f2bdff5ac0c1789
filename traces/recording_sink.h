#pragma once
// A Sink that keeps every event in memory, in arrival order: for tests and for the analyzer
// of short runs.

#include <string>
#include <vector>

#include "traces/sink.h"

namespace tpusim::traces {

class RecordingSink final : public Sink {
 public:
  // Keeps only what the step analyzer reads (analyzer.h): step slices, feed and collective
  // waits, the ici track and host tracks; unit instructions and counters are dropped, so a long
  // run's analysis stays small.
  void keep_only_analysis_events() { analysis_only_ = true; }

  struct Slice {
    TrackId track;
    std::string name;
    TimePs start;
    TimePs end;
  };
  struct Sample {
    TrackId track;
    TimePs time;
    double value;
  };

  TrackId declare_track(const TrackInfo& info) override;
  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override;
  void counter(TrackId track, TimePs time, double value) override;

  const std::vector<TrackInfo>& tracks() const { return tracks_; }
  const TrackInfo& track(TrackId id) const { return tracks_.at(static_cast<size_t>(id)); }
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<Sample>& samples() const { return samples_; }
  // Slices on the track of that chip, core and name, in arrival order.
  std::vector<Slice> slices_on(int chip, int core, const std::string& name) const;

 private:
  bool analysis_only_ = false;
  std::vector<TrackInfo> tracks_;
  std::vector<Slice> slices_;
  std::vector<Sample> samples_;
};

}  // namespace tpusim::traces
