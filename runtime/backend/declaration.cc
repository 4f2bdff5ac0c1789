#include "runtime/backend/declaration.h"

#include <algorithm>

#include "common/strings.h"

namespace tpusim::runtime {
namespace {

template <typename T>
bool contains(const std::vector<T>& values, T value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// "float32, mixed_bfloat16": the words for `values`.
template <typename T, size_t N>
std::string names_of(const std::vector<T>& values, const NamedValues<T, N>& table) {
  std::vector<std::string> names;
  for (T v : values) names.emplace_back(table.name(v));
  return str_join(names, ", ");
}

// One option that only some backends honour: how it is named, when it is asked for, whether a
// backend's declaration supports it, and what a backend without it does instead.
struct Requirement {
  const char* flag;  // the CLI's option
  // The option as it is set, in CompileOptions' or RunFeatures' terms ("fuse_pools off"), or ""
  // when it is not asked for.
  std::string (*asked)(const CompileOptions&, const RunFeatures&);
  bool (*supported)(const BackendSupport&, const CompileOptions&);
  const char* lacking;  // what the backends without it do: "ring order only"
};

std::string off_if(bool on, const char* field) { return on ? "" : str_cat(field, " off"); }

// The collectives' flags ...
std::vector<Requirement> collective_requirements() {
  return {
      {"--allreduce",
       [](const CompileOptions& o, const RunFeatures&) {
         return o.allreduce == AllReduceAlgorithm::kRing
                    ? ""
                    : str_cat("allreduce '", kAllReduceAlgorithms.name(o.allreduce), "'");
       },
       [](const BackendSupport& s, const CompileOptions& o) {
         return contains(s.allreduce_algorithms, o.allreduce);
       },
       "ring order only"},
      {"--overlap-allreduce",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.overlap_allreduce, "overlap_allreduce");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.collective_timing; },
       "the all-reduce is not timed"},
      {"--allreduce-combine-threshold",
       [](const CompileOptions& o, const RunFeatures&) {
         return o.allreduce_combine_bytes == 0
                    ? ""
                    : str_cat("allreduce_combine_bytes ", o.allreduce_combine_bytes);
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.collective_timing; },
       "the all-reduce is not timed"},
  };
}

// ... the fusion switches, each on unless turned off: the groups' and reductions' ...
std::vector<Requirement> fusion_requirements() {
  return {
      {"--fuse-convolutions",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_convolutions, "fuse_convolutions");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-pools",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_pools, "fuse_pools");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--recompute-shared-producers",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.recompute_shared_producers, "recompute_shared_producers");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-reductions",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_reductions, "fuse_reductions");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-multi-output",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_multi_output, "fuse_multi_output");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-producers",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_producers, "fuse_producers");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-pointwise-convolutions",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_pointwise_convolutions, "fuse_pointwise_convolutions");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
  };
}

// ... the convolutions' and products' fusion switches ...
std::vector<Requirement> conv_fusion_requirements() {
  return {
      {"--fuse-conv-windows",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_conv_windows, "fuse_conv_windows");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-rng",
       [](const CompileOptions& o, const RunFeatures&) { return off_if(o.fuse_rng, "fuse_rng"); },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-conv-producers",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_conv_producers, "fuse_conv_producers");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-matmul-producers",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_matmul_producers, "fuse_matmul_producers");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-matmul-consumers",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_matmul_consumers, "fuse_matmul_consumers");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-conv-consumers",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_conv_consumers, "fuse_conv_consumers");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
      {"--fuse-conv-reductions",
       [](const CompileOptions& o, const RunFeatures&) {
         return off_if(o.fuse_conv_reductions, "fuse_conv_reductions");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.fusion_options; },
       "no fusion to time"},
  };
}

// ... and what a run records or how much of it is simulated.
std::vector<Requirement> run_requirements() {
  return {
      {"--timing-only",
       [](const CompileOptions&, const RunFeatures& r) {
         return std::string(r.timing_only ? "timing_only" : "");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.timing_only; },
       "values always computed"},
      {"--trace",
       [](const CompileOptions&, const RunFeatures& r) {
         return std::string(r.trace ? "a trace (trace_path)" : "");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.traces; }, "no timeline"},
      {"--profile",
       [](const CompileOptions&, const RunFeatures& r) {
         return std::string(r.profile ? "an XProf profile (profile)" : "");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.traces; }, "no timeline"},
      {"--fold-replicas",
       [](const CompileOptions& o, const RunFeatures&) {
         return o.simulated_replicas == 0 || o.simulated_replicas >= o.replicas
                    ? ""
                    : str_cat("replica folding (", o.simulated_replicas, " of ", o.replicas,
                              " replicas simulated)");
       },
       [](const BackendSupport& s, const CompileOptions&) { return s.folding; },
       "every replica computed"},
  };
}

// In the order the CLI documents its flags.
const std::vector<Requirement>& requirements() {
  static const std::vector<Requirement> table = [] {
    std::vector<Requirement> all = collective_requirements();
    for (std::vector<Requirement> part :
         {fusion_requirements(), conv_fusion_requirements(), run_requirements()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return table;
}

// "the tpusim backend", "the tpusim or xla backend": those of `known` that support `r`.
std::string supporters(const Requirement& r, const CompileOptions& options,
                       const std::vector<BackendDeclaration>& known) {
  std::vector<std::string> names;
  for (const BackendDeclaration& b : known) {
    if (r.supported(b.supports, options)) names.push_back(b.name);
  }
  if (names.empty()) return "a backend that supports it (none here does)";
  return str_cat("the ", str_join(names, " or "), names.size() == 1 ? " backend" : " backends");
}

// "cpu and gpu": those of `known` (or `backend` alone) that do not support `r`.
std::string lackers(const Requirement& r, const CompileOptions& options,
                    const BackendDeclaration& backend,
                    const std::vector<BackendDeclaration>& known) {
  if (known.empty()) return backend.name;
  std::vector<std::string> names;
  for (const BackendDeclaration& b : known) {
    if (!r.supported(b.supports, options)) names.push_back(b.name);
  }
  return str_join(names, " and ");
}

}  // namespace

absl::Status check_backend_options(const BackendDeclaration& backend, const CompileOptions& options,
                                   const RunFeatures& run, OptionNames names,
                                   const std::vector<BackendDeclaration>& known) {
  const std::string who = str_cat(backend.name, " backend: ");
  if (options.replicas == 0)
    return absl::InvalidArgumentError(str_cat(who, "replicas must be at least 1"));
  if (options.simulated_replicas > options.replicas) {
    return absl::InvalidArgumentError(
        str_cat(who, options.simulated_replicas, " simulated replicas of ", options.replicas));
  }
  for (const Requirement& r : requirements()) {
    const std::string asked = r.asked(options, run);
    if (asked.empty() || r.supported(backend.supports, options)) continue;
    const std::string why =
        str_cat(" (", lackers(r, options, backend, known), ": ", r.lacking, ")");
    const std::string what = names == OptionNames::kFlags ? r.flag : asked;
    if (known.empty())
      return absl::InvalidArgumentError(str_cat(who, what, " is not supported", why));
    return absl::InvalidArgumentError(str_cat(names == OptionNames::kFlags ? "" : who, what,
                                              " needs ", supporters(r, options, known), why));
  }
  return absl::OkStatus();
}

absl::Status check_dtype_policy(const BackendDeclaration& backend, DTypePolicy policy) {
  if (contains(backend.supports.dtype_policies, policy)) return absl::OkStatus();
  return absl::InvalidArgumentError(str_cat(
      backend.name, " backend: dtype policy '", kDTypePolicies.name(policy),
      "' is not one it trains (", names_of(backend.supports.dtype_policies, kDTypePolicies), ")"));
}

Precision effective_precision(const BackendDeclaration& backend, Precision requested) {
  return backend.supports.precisions.size() == 1 ? backend.supports.precisions.front() : requested;
}

absl::Status precision_choice_error(const BackendDeclaration& backend, const std::string& text) {
  if (backend.supports.precisions.size() != 1) return absl::OkStatus();
  const Precision only = backend.supports.precisions.front();
  return absl::InvalidArgumentError(
      str_cat("'", text, "': ", backend.name, "'s precision is ",
              only == Precision::kMxu ? "its MXU's (bf16 products)" : kPrecisions.name(only),
              ", not an option"));
}

}  // namespace tpusim::runtime
