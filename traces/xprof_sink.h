#pragma once
// Collects what an XProf profile needs from the device's timeline (xprof_profile.h), per simulated
// core, keyed by its ordinal in the slice (chip x cores per chip + core): its steps, from its
// "steps" track ("step N" slices, N the global step), and its infeed unit's waits for the host
// ("infeed.wait" slices). The op timeline and the host stages are added by the caller, which
// knows the loop's ops and the pipeline's batches.

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "traces/sink.h"
#include "traces/xprof_profile.h"

namespace tpusim::traces {

class XprofDeviceSink final : public Sink {
 public:
  explicit XprofDeviceSink(uint32_t cores_per_chip) : cores_per_chip_(cores_per_chip) {}

  TrackId declare_track(const TrackInfo& info) override;
  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override;
  void counter(TrackId, TimePs, double) override {}

  // Per core ordinal, its steps' spans as the step analyzer counts a step (traces/analyzer.cc):
  // until the core's next step begins, or, for the last step before the host's round trip, until
  // that round trip ends (a device loop's last step carries the host's time between loops).
  std::map<uint32_t, std::map<int64_t, XprofSpan>> steps() const;
  // Per core ordinal, its infeed's waits, in time order.
  const std::map<uint32_t, std::vector<XprofSpan>>& infeed_waits() const { return waits_; }

 private:
  struct Track {
    enum class Kind { kSteps, kInfeed, kRoundTrips } kind = Kind::kSteps;
    uint32_t core = 0;
  };
  uint32_t cores_per_chip_;
  uint32_t next_ = 0;
  std::vector<std::optional<Track>> tracks_;  // by TrackId: the steps and infeed tracks
  std::map<uint32_t, std::map<int64_t, XprofSpan>> steps_;
  std::map<uint32_t, std::vector<XprofSpan>> waits_;
  std::vector<XprofSpan> round_trips_;
};

}  // namespace tpusim::traces
