#pragma once
// Building one XPlane of an XProf profile (xplane.proto): event and stat metadata interned by
// name (ids from 1, as XProf's own writers number them), lines added by id, and typed stats. A
// value's type is part of the format: XProf reads peak rates as doubles, FLOPs, bytes and ids as
// integers, and a stat of the wrong type reads as 0 (docs/profiling.md, "In XProf").

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "traces/xplane.pb.h"

namespace tpusim::traces {

class XPlaneBuilder {
 public:
  XPlaneBuilder(xprof::XPlane* plane, int64_t id, std::string_view name);

  // The id of the stat metadata named `name`, declared on first use.
  int64_t stat_id(std::string_view name);
  // The event metadata named `name`, declared on first use (display_name unset).
  xprof::XEventMetadata& event_metadata(std::string_view name);
  // A new line.
  xprof::XLine* add_line(int64_t id, std::string_view name);
  // An event of `metadata` on `line` over [start_ps, end_ps) of the profile's time (the line's
  // timestamp_ns is 0).
  xprof::XEvent* add_event(xprof::XLine* line, const xprof::XEventMetadata& metadata,
                           uint64_t start_ps, uint64_t end_ps);

  // Stats into a repeated field: a plane's, an event's or an event metadata's.
  using Stats = google::protobuf::RepeatedPtrField<xprof::XStat>;
  void add_double(Stats* stats, std::string_view name, double value);
  void add_int(Stats* stats, std::string_view name, int64_t value);
  void add_str(Stats* stats, std::string_view name, std::string_view value);
  void add_bytes(Stats* stats, std::string_view name, const std::string& value);

  xprof::XPlane& plane() { return *plane_; }

 private:
  xprof::XStat* add_stat(Stats* stats, std::string_view name);

  xprof::XPlane* plane_;
  std::map<std::string, int64_t, std::less<>> stat_ids_;
  std::map<std::string, int64_t, std::less<>> event_ids_;
};

}  // namespace tpusim::traces
