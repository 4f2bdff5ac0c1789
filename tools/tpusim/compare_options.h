#pragma once
// tpusim compare's options: their declarations, and the parsers of those that name runs
// (--backends entries, --dtype-policy, --baseline-runs).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <boost/program_options.hpp>

#include "estimator/jobs/compare_job.h"

namespace tpusim::cli {

// The tolerances compare's flags bind (the job binds the rest).
struct CompareFlags {
  double loss_tol = 0, weight_tol = 0, weight_atol = 0, factor = 0;
};

// compare's options, the numbers bound to `job` and `f`.
boost::program_options::options_description compare_options(jobs::CompareJob* job, CompareFlags* f);

// A --backends entry: "cpu" (the CLI's precision, mxu), "cpu:fp32"; errors name the backend.
absl::StatusOr<jobs::CompareBackend> parse_backend(const std::string& text);

// --dtype-policy: one policy for every run, or one per backend, in order (to compare policies:
// cpu,cpu with float32,mixed_bfloat16). Runs whose policies differ are labelled cpu@POLICY.
// Returns whether they differ.
absl::StatusOr<bool> assign_policies(const std::string& text,
                                     std::vector<jobs::CompareBackend>* backends);

// --baseline-runs: a count from 1 to 64, or nullopt for "auto".
absl::StatusOr<std::optional<uint32_t>> parse_baseline_runs(const std::string& text);

}  // namespace tpusim::cli
