#pragma once
// One all-reduce over every core of a slice, timed against the bandwidth-optimal bound for its
// algorithm (sim/net/collective_bound.h): what `tpusim allreduce` runs and reports, and the
// program the collective bench times.
//
// Each core contributes `bytes` of f32 at the base of its share of its chip's HBM
// (sim::hbm_share) and receives the sum right after them. With values, every core's input is
// counter_uniform(7, core, i) - 0.5, and the result is checked against a float64 sum.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "sim/isa/isa.pb.h"
#include "sim/net/collective_bound.h"
#include "traces/sink.h"

namespace tpusim::sim {

struct AllReduceRequest {
  uint64_t bytes = 0;  // each core's contribution: a positive multiple of 4 (f32 elements)
  isa::Collective::Algorithm algorithm = isa::Collective::RING;
  uint64_t chunk_bytes = 1 << 20;  // the pipelining granule: a positive multiple of 4
  bool timing_only = false;        // time only, no values
};

// The host memory computing the request's values takes: each core's input and result in the
// simulated HBM with the interconnect's chunks beside them (about 4 x cores x bytes: 8.93 GB
// measured for 8 cores of 256 MiB), and the host's own copies (the inputs as they are written
// and their float64 sums, 3 x bytes; two cores' results as they are compared, 2 x bytes).
uint64_t all_reduce_host_bytes(const config::SliceSpec& slice, const AllReduceRequest& request);

// Why computing the request's values would take more than the host's memory budget
// (all_reduce_host_bytes against common/host_budget.h's), naming the figures; "" when it would
// not or the request is timing-only. Callers add how to run timing-only.
std::string all_reduce_host_memory_problem(const config::SliceSpec& slice,
                                           const AllReduceRequest& request);

// The reasons a request cannot run on `slice`, or OK: sizes that are not multiples of 4, input
// and result that do not fit a core's HBM share, values that would take more host memory than
// the host's budget. Each message names the figures.
absl::Status check_all_reduce(const config::SliceSpec& slice, const AllReduceRequest& request);

// Every core's stream: the one collective, then halt.
isa::Program all_reduce_program(const config::SliceSpec& slice, const AllReduceRequest& request);

struct AllReduceNumerics {
  bool bitwise_identical_on_every_core = false;
  double max_abs_error_vs_f64_sum = 0;
};

struct AllReduceResult {
  uint64_t cycles = 0;
  double seconds = 0;             // simulated
  CollectiveBound bound;          // the algorithm's bandwidth-optimal bound
  double link_floor_seconds = 0;  // the busiest link's bytes at its bandwidth
  double chunk_transfers = 0;
  double link_bytes = 0;
  double busiest_link_busy_seconds = 0;
  double host_seconds = 0;  // the simulation's host time (the run alone, not setup or checks)
  std::optional<AllReduceNumerics> numerics;  // unless timing-only
};

// Builds a System for `slice` (the "tpu" MXU policy; `sink`, may be null, gets the trace),
// writes the inputs unless timing-only, runs all_reduce_program and reads the results back.
// Errors: check_all_reduce's, the System's and the run's.
absl::StatusOr<AllReduceResult> run_all_reduce(std::shared_ptr<const config::SliceSpec> slice,
                                               const AllReduceRequest& request, traces::Sink* sink);

}  // namespace tpusim::sim
