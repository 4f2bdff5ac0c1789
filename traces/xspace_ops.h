#pragma once
// The ops of an XProf profile (an XSpace, .xplane.pb) and what each cost a step, as XProf's op
// profile ranks them: what `tpusim analyze` lists for a profile and `tpusim compare-profile`
// matches between a measured and a simulated one. Two kinds of profile are read:
//   - a TPU job's (tpusim's `train --profile`, or a real one): each `/device:TPU:N` plane's
//     "Steps" line gives the device's steps, its "XLA Ops" line the op executions, each op's
//     metadata its hlo_category, flops and bytes_accessed; the plane's peak_teraflops_per_second
//     and peak_hbm_bw_gigabytes_per_second stats the device's roofs;
//   - a host-only one (XLA on the CPU, as JAX's profiler writes it): the `/host:CPU` plane's
//     events carrying a `step_num` stat are the steps (StepTraceAnnotation's), its events carrying
//     an `hlo_op` stat the op executions (the name is the stat's; XLA's CPU ops have no category).
// An op's time is its self time: an execution's span less the executions nested inside it on
// its line (XProf's op profile reads a line so). Executions outside every step of their device
// are not counted (a profile's warm-up and compile). Errors name the file, plane, line and event.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <nlohmann/json.hpp>

#include "traces/xplane.pb.h"

namespace tpusim::traces {

struct ProfileOp {
  std::string name;
  std::string category;    // XLA's hlo_category ("convolution", "loop fusion"); "" if none
  int64_t executions = 0;  // within steps, every device
  uint64_t self_ps = 0;    // summed over those executions
  int64_t flops = 0;       // one execution's (0: the profile does not say)
  int64_t bytes_accessed = 0;
};

struct OpProfile {
  std::string path;
  std::string device;  // "TPU v3" (the device plane's device_type_string), or "CPU"
  int devices = 0;     // device planes read (1 for a host-only profile)
  int64_t steps = 0;   // distinct step numbers
  // The average over the steps of the slowest device's span of that step, in ps.
  double step_ps = 0;
  double peak_teraflops_per_second = 0;  // one device's; 0 where the profile does not say
  double peak_hbm_gigabytes_per_second = 0;
  std::vector<ProfileOp> ops;  // costliest first (self time), then by name

  // An op's time per step on one device, in seconds: its self time over steps x devices.
  double seconds_per_step(const ProfileOp& op) const;
  // The `top` costliest ops (all with top 0) as text, and the whole profile as JSON.
  std::string ops_text(size_t top) const;
  nlohmann::ordered_json to_json() const;
};

// Parses the file as an XSpace; errors name the file.
absl::StatusOr<xprof::XSpace> parse_xspace_file(const std::string& path);

absl::StatusOr<OpProfile> read_op_profile(const std::string& path);
absl::StatusOr<OpProfile> op_profile_of(const xprof::XSpace& space, const std::string& path);

}  // namespace tpusim::traces
