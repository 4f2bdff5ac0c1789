#include "tools/tpusim/compare_options.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include "common/strings.h"
#include "runtime/backend/registry.h"
#include "runtime/opcheck/harness.h"
#include "tools/tpusim/backend_options.h"

namespace tpusim::cli {

using jobs::CompareBackend;

absl::StatusOr<CompareBackend> parse_backend(const std::string& text) {
  auto spec = runtime::opcheck::parse_backend_spec(text);
  if (!spec.ok()) return spec.status();
  auto declared = runtime::find_backend(spec->name);
  if (!declared.ok()) {
    return absl::InvalidArgumentError(
        str_cat("unknown backend '", spec->name, "' (", runtime::backend_names(", "), ")"));
  }
  const bool given = text.find(':') != std::string::npos;
  if (given) {
    if (absl::Status s = runtime::precision_choice_error(**declared, text); !s.ok()) return s;
  }
  return CompareBackend{spec->name, given ? spec->precision : kCliPrecision, text};
}

// --dtype-policy: one policy for every run, or one per backend, in order (to compare policies:
// cpu,cpu with float32,mixed_bfloat16). Runs whose policies differ are labelled cpu@POLICY.
// Returns whether they differ.
absl::StatusOr<bool> assign_policies(const std::string& text,
                                     std::vector<CompareBackend>* backends) {
  std::vector<runtime::models::DTypePolicy> policies;
  for (const absl::string_view name : absl::StrSplit(text, ',')) {
    auto policy = runtime::models::parse_dtype_policy(std::string(name));
    if (!policy.ok())
      return absl::InvalidArgumentError(str_cat("--dtype-policy: ", policy.status().message()));
    policies.push_back(*policy);
  }
  if (policies.size() != 1 && policies.size() != backends->size()) {
    return absl::InvalidArgumentError(
        str_cat("--dtype-policy takes one policy or one per backend (", backends->size(),
                " backends, ", policies.size(), " policies)"));
  }
  bool uniform = true;
  for (size_t k = 0; k < backends->size(); ++k) {
    (*backends)[k].policy = policies[policies.size() == 1 ? 0 : k];
    uniform = uniform && (*backends)[k].policy == (*backends)[0].policy;
  }
  if (!uniform) {
    for (CompareBackend& b : *backends)
      b.label += str_cat("@", runtime::models::dtype_policy_name(b.policy));
  }
  return !uniform;
}

// --baseline-runs: a count from 1 to 64, or nullopt for "auto".
absl::StatusOr<std::optional<uint32_t>> parse_baseline_runs(const std::string& text) {
  if (text == "auto") return std::optional<uint32_t>();
  uint32_t runs = 0;
  if (!absl::SimpleAtoi(text, &runs) || runs < 1 || runs > 64) {
    return absl::InvalidArgumentError(
        str_cat("--baseline-runs is a count from 1 to 64 or auto (got '", text, "')"));
  }
  return std::optional<uint32_t>(runs);
}

}  // namespace tpusim::cli
