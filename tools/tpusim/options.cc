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

void add_dtype_policy_option(boost::program_options::options_description& options) {
  options.add_options()(
      "dtype-policy", boost::program_options::value<std::string>()->default_value("float32"),
      "float32 | mixed_bfloat16: activations, their gradients and the MXU's operands in bf16, "
      "variables and the loss in f32 (TPU mixed precision, tf.tpu.bfloat16_scope)");
}

absl::StatusOr<runtime::models::DTypePolicy> dtype_policy_from(
    const boost::program_options::variables_map& vm) {
  auto policy = runtime::models::parse_dtype_policy(vm["dtype-policy"].as<std::string>());
  if (!policy.ok())
    return absl::InvalidArgumentError(str_cat("--dtype-policy: ", policy.status().message()));
  return policy;
}

}  // namespace tpusim::cli
