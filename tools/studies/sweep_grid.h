#pragma once
// The grid of a `tpusim sweep`: each --set FIELD=v1,v2,... is one axis, and the points are every
// combination (the last axis varies fastest). A FIELD that names a slice config field
// (chip.core.mxu_count) edits the config (configs/overrides.h); any other names a run option of
// the subcommand (iterations_per_loop becomes --iterations-per-loop).

#include <string>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::studies {

struct SweepAxis {
  std::string field;
  std::vector<std::string> values;
  bool config = false;  // a slice config field, else a run option
};

struct SweepPoint {
  std::string id;                   // p000, p001, ...
  std::vector<std::string> values;  // one per axis
};

// Parses "FIELD=v1,v2,..."; the error names the spec.
absl::StatusOr<SweepAxis> parse_sweep_axis(const std::string& spec);

// The most points a grid may have: a study past it is a typo (three axes of a thousand values),
// and its list of points alone would not fit in memory long before it could run.
constexpr size_t kMaxSweepPoints = 100000;

// OK when the axes' grid has at most kMaxSweepPoints points; the error gives its size.
absl::Status check_sweep_size(const std::vector<SweepAxis>& axes);

// Every combination of the axes' values, in order.
std::vector<SweepPoint> sweep_points(const std::vector<SweepAxis>& axes);

// The subcommand's flag for a run option: iterations_per_loop -> --iterations-per-loop.
std::string run_option_flag(const std::string& field);

// "chip.core.mxu_count=4 iterations_per_loop=10": a point's values, for labels and logs.
std::string describe_point(const std::vector<SweepAxis>& axes, const SweepPoint& point);

}  // namespace tpusim::studies
