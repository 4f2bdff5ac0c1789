#pragma once
// The receiving end of every timeline event tpusim produces. Units of the simulator and stages
// of the host pipeline declare their tracks once and then report activity on them; writers
// (Perfetto, Chrome JSON) and the analyzer implement Sink. Times are integer picoseconds of
// simulated time, so one cycle of any clock up to 1 THz is representable exactly.

#include <cstdint>
#include <string>
#include <string_view>

namespace tpusim::traces {

using TimePs = uint64_t;

// A handle returned by Sink::declare_track; cheap to copy and compare.
enum class TrackId : uint32_t {};

// Where a track sits in the hierarchy chip > core > unit (or host > stage).
struct TrackInfo {
  enum class Kind { kUnit, kHost, kCounter };
  Kind kind = Kind::kUnit;
  int chip = -1;         // -1 when the track belongs to no chip (host tracks)
  int core = -1;         // -1 when the track belongs to the chip, not one core (HBM, ICI)
  std::string name;      // "mxu0", "vpu", "dma", "infeed", "hbm_bandwidth", "parse", ...
  std::string unit;      // counters: what the value measures ("bytes/s", "entries")
  uint32_t threads = 0;  // host pipeline stages: the threads the stage runs on (0: not a stage)
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Declares a track and returns its handle; declare each track once, before its events.
  virtual TrackId declare_track(const TrackInfo& info) = 0;
  // A span of activity [start, end) on a track, e.g. one instruction on one unit. `name` must
  // outlive the call only (sinks copy what they keep).
  virtual void slice(TrackId track, std::string_view name, TimePs start, TimePs end) = 0;
  // A counter sample: from `time` on, the counter track reads `value`.
  virtual void counter(TrackId track, TimePs time, double value) = 0;
  // False while events would go nowhere (a router with no target): producers on hot paths
  // check it before computing what they would report.
  virtual bool recording() const { return true; }
};

}  // namespace tpusim::traces
