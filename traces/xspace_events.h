#pragma once
// Reading an XSpace's events safely, shared by the step reader (xspace_reader.h) and the op
// reader (xspace_ops.h): every time an event gives checked against the profile's bound, every
// metadata and stat id it names looked up before use, with errors naming where it is.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <absl/status/statusor.h>

#include "traces/sink.h"
#include "traces/xplane.pb.h"

namespace tpusim::traces {

// The planes XProf names a TPU core's ("/device:TPU:0") and a host's.
inline constexpr std::string_view kTpuPlanePrefix = "/device:TPU:";
inline constexpr std::string_view kHostPlaneName = "/host:CPU";

// An event's [start, end) in ps from the profile's start (its line's timestamp plus its offset),
// or an error naming `where` when it is not within [0, 10^15] ps (1,000 s).
absl::StatusOr<std::pair<TimePs, TimePs>> event_span(const xprof::XLine& line,
                                                     const xprof::XEvent& e,
                                                     const std::string& where);

// The metadata an event names, or an error naming `where`.
absl::StatusOr<const xprof::XEventMetadata*> event_metadata(const xprof::XPlane& plane,
                                                            const xprof::XEvent& e,
                                                            const std::string& where);

// A stat's name (its metadata's), "" when the plane declares no such metadata.
std::string stat_name(const xprof::XPlane& plane, const xprof::XStat& s);
// A string stat's value: its str_value, or for a ref_value the name of the stat metadata it
// refers to (XProf's interned strings); nullopt for another type or a reference to nothing.
std::optional<std::string> stat_string(const xprof::XPlane& plane, const xprof::XStat& s);
// An integer stat's value (int64, or uint64 up to 2^63 - 1); nullopt for another type.
std::optional<int64_t> stat_int(const xprof::XStat& s);
// A number stat's value as a double (double, int64 or uint64); nullopt for another type.
std::optional<double> stat_double(const xprof::XStat& s);

// The stat named `name` among `stats`, or nullptr.
const xprof::XStat* find_stat(const xprof::XPlane& plane,
                              const google::protobuf::RepeatedPtrField<xprof::XStat>& stats,
                              const std::string& name);

// A step number written as text ("12"), or nullopt.
std::optional<int64_t> parse_step_number(const std::string& text);

// The events of a /device:TPU:N plane's "Steps" line (each named by its step number) and its
// "XLA Ops" line (each an op execution, its metadata the op's), each checked as above; stops at
// the first error, naming it under `where` (the plane) with the line. What one run's profile
// cannot hold is refused too: a step twice or of no time, an op's execution repeated at the same
// offset and duration.
struct DeviceEventVisitor {
  std::function<void(int64_t step, std::pair<TimePs, TimePs> span)> step;
  std::function<void(const xprof::XEventMetadata& op, std::pair<TimePs, TimePs> span)> op;
};
absl::Status visit_device_events(const xprof::XPlane& plane, const std::string& where,
                                 const DeviceEventVisitor& visit);

// The events of a host plane that carry a `step_num` stat (StepTraceAnnotation's, in a profile of
// XLA on the CPU), each with its step number and span, checked as above; stops at the first
// error ("a step_num that is no step number", or a span out of bounds), naming the line.
absl::Status visit_host_steps(
    const xprof::XPlane& plane, const std::string& where,
    const std::function<void(int64_t step, std::pair<TimePs, TimePs> span)>& visit);

// OK, or InvalidArgument when two planes of `space` share a name ("plane 8 '/device:TPU:0'
// repeats plane 0's name"): a profile holds one plane per device and host, and two profiles
// merged would count each device twice.
absl::Status check_plane_names(const xprof::XSpace& space, const std::string& path);

}  // namespace tpusim::traces
