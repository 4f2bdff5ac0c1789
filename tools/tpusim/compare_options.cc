#include "tools/tpusim/compare_options.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include "common/strings.h"
#include "runtime/backend/registry.h"
#include "runtime/opcheck/harness.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/data_options.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/shared_flags.h"

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

namespace po = boost::program_options;

po::options_description compare_options(jobs::CompareJob* job, CompareFlags* f) {
  po::options_description options("options");
  add_model_flag(
      options, &job->model,
      OtherDefault<std::string>{"mlp", "here mlp: the quickest to train on each backend"});
  add_optimizer_flags(
      options, &job->optimizer.learning_rate.initial,
      OtherDefault<std::string>{"sgd", "here sgd: the update adds nothing of its own to compare"},
      OtherDefault<float>{0.05f, "here 0.05, sgd's rate for the zoo's small models"});
  add_batch_size_flag(options, &job->batch,
                      OtherDefault<int64_t>{256,
                                            "here 256: each backend trains the same steps, "
                                            "so a smaller batch keeps a comparison quick"});
  add_config_flag(options, &job->slice);
  add_report_flag(options);
  add_json_flag(options);
  options.add_options()(
      "backends", po::value<std::string>()->default_value("tpusim,cpu"),
      str_cat("comma-separated, the first the reference: ", runtime::backend_names(", "),
              "; each in mxu precision (bf16 products, like the MXU's) unless named NAME:fp32 "
              "(`tpusim backends` lists each one's precisions)")
          .c_str())("steps", po::value<int64_t>(&job->steps)->default_value(20),
                    "training steps on each")("loss-tolerance",
                                              po::value<double>(&f->loss_tol)->default_value(1e-5),
                                              "|loss difference| accepted at any step")(
      "weight-tolerance", po::value<double>(&f->weight_tol)->default_value(1e-3),
      "largest acceptable weight difference at the end, relative to the variable's largest value")(
      "weight-atol", po::value<double>(&f->weight_atol)->default_value(1e-6),
      "absolute weight difference accepted (a variable agrees when its max difference is "
      "<= weight-atol + weight-tolerance x its largest value): variables that stay near zero")(
      "baseline", po::value<std::string>()->default_value("on"),
      "on | off: also train the cpu from initial weights one ulp apart, and accept differences "
      "within --noise-factor times the drift that causes")(
      "noise-factor", po::value<double>(&f->factor)->default_value(5),
      "how many times the rounding baseline's drift a difference may be")(
      "baseline-runs", po::value<std::string>()->default_value("auto"),
      "N | auto: nudged runs in the baseline, each with its own pattern of ulp signs, the "
      "baseline their largest drift; auto: one, and three when a backend differs by one")(
      "model-dir", po::value<std::string>(),
      "a new folder to keep the runs in (default: a temporary one, removed)");
  options.add_options()(
      "dtype-policy", po::value<std::string>()->default_value("float32"),
      "float32 | mixed_bfloat16 (bf16 activations and MXU operands, f32 variables and loss) for "
      "every run, or one per backend to compare the policies (--backends cpu,cpu "
      "--dtype-policy float32,mixed_bfloat16)");
  add_data_options(options);
  add_seq_length_option(options);
  add_imported_model_options(options);
  return options;
}

}  // namespace tpusim::cli
