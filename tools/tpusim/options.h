#pragma once
// Option values several subcommands share, parsed with messages that list what is accepted.

#include <string>

#include <absl/status/statusor.h>

#include "sim/isa/isa.pb.h"

namespace tpusim::cli {

// "default" | "high" | "highest".
absl::StatusOr<isa::Precision> parse_precision(const std::string& name);
// OK when `name` is a registered MXU timing policy.
absl::Status check_mxu_policy(const std::string& name);
// The zoo's model names joined by `separator`, for help texts: "mlp | mnist_cnn | ...".
std::string zoo_model_names(const std::string& separator);

}  // namespace tpusim::cli
