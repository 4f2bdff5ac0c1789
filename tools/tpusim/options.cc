#include "tools/tpusim/options.h"

#include "common/strings.h"
#include "runtime/models/zoo.h"
#include "sim/timing/mxu_policy.h"

namespace tpusim::cli {

absl::StatusOr<isa::Precision> parse_precision(const std::string& name) {
  if (name == "default") return isa::DEFAULT;
  if (name == "high") return isa::HIGH;
  if (name == "highest") return isa::HIGHEST;
  return absl::InvalidArgumentError(
      str_cat("unknown precision '", name, "' (default, high or highest)"));
}

absl::Status check_mxu_policy(const std::string& name) {
  if (sim::make_mxu_policy(name, 1, 1) != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      str_cat("unknown MXU policy '", name, "' (", str_join(sim::mxu_policy_names(), ", "), ")"));
}

std::string zoo_model_names(const std::string& separator) {
  std::vector<std::string> names;
  for (const auto& m : runtime::models::model_infos()) names.push_back(m.name);
  return str_join(names, separator);
}

}  // namespace tpusim::cli
