// tpusim backends [--json]: the registry's backends (runtime/backend/registry.h), what each
// supports, whether this binary has it and whether it can run here.
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "runtime/backend/registry.h"
#include "runtime/gpu/cuda_probe.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {

namespace po = boost::program_options;

namespace {

// The words for `values`, in order.
template <typename T, size_t N>
std::vector<std::string> names_of(const std::vector<T>& values, const NamedValues<T, N>& table) {
  std::vector<std::string> names;
  for (T v : values) names.emplace_back(table.name(v));
  return names;
}

nlohmann::ordered_json supports_json(const runtime::BackendSupport& s) {
  return {{"precisions", names_of(s.precisions, runtime::kPrecisions)},
          {"dtype_policies", names_of(s.dtype_policies, runtime::kDTypePolicies)},
          {"runs_a_slice", s.runs_a_slice},
          {"simulated_time", s.simulated_time},
          {"timing_only", s.timing_only},
          {"traces", s.traces},
          {"folding", s.folding},
          {"fusion_options", s.fusion_options},
          {"allreduce_algorithms", names_of(s.allreduce_algorithms, runtime::kAllReduceAlgorithms)},
          {"collective_timing", s.collective_timing}};
}

// "precisions fp32|mxu; dtype policies float32|mixed_bfloat16; ...; timing-only; traces".
std::string supports_text(const runtime::BackendSupport& s) {
  std::vector<std::string> parts = {
      str_cat("precision ", str_join(names_of(s.precisions, runtime::kPrecisions), "|")),
      str_cat("dtype policy ", str_join(names_of(s.dtype_policies, runtime::kDTypePolicies), "|")),
      str_cat("allreduce ",
              str_join(names_of(s.allreduce_algorithms, runtime::kAllReduceAlgorithms), "|"))};
  const std::pair<bool, const char*> flags[] = {
      {s.runs_a_slice, "a slice (--config)"},
      {s.simulated_time, "simulated time"},
      {s.timing_only, "--timing-only"},
      {s.traces, "--trace"},
      {s.folding, "--fold-replicas"},
      {s.fusion_options, "--fuse-* and --recompute-shared-producers"},
      {s.collective_timing, "--overlap-allreduce and --allreduce-combine-threshold"}};
  for (const auto& [on, what] : flags) {
    if (on) parts.push_back(what);
  }
  return str_join(parts, "; ");
}

}  // namespace

int run_backends(const std::vector<std::string>& args) {
  po::options_description options("options");
  add_json_flag(options);
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim backends [--json]\n\n"
      "Lists the backends tpusim knows (name, built, available, reason), what each supports\n"
      "(precisions, dtype policies, timing-only, folding, traces, fusion options, all-reduce\n"
      "algorithms and their timing) and what the CUDA runtime sees on this machine.\n";
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;

  const auto& backends = runtime::registered_backends();
  const auto cuda = runtime::gpu::probe_cuda();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& b : backends) {
    const runtime::BackendAvailability a = b.availability();
    rows.push_back({{"name", b.name},
                    {"description", b.description},
                    {"built", a.built},
                    {"available", a.available},
                    {"reason", a.reason},
                    {"supports", supports_json(b.supports)}});
  }
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const auto& d : cuda.devices) {
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"compute_capability", std::to_string(d.compute_capability_major) + "." +
                                                  std::to_string(d.compute_capability_minor)},
                       {"memory_bytes", d.memory_bytes}});
  }
  if (vm["json"].as<bool>()) {
    std::cout << json_text(nlohmann::ordered_json{{"backends", rows},
                                                  {"cuda",
                                                   {{"built", cuda.built},
                                                    {"runtime_version", cuda.runtime_version},
                                                    {"driver_version", cuda.driver_version},
                                                    {"devices", devices},
                                                    {"reason", cuda.reason}}}})
              << "\n";
    return kOk;
  }
  for (const auto& b : backends) {
    const runtime::BackendAvailability a = b.availability();
    std::cout << b.name << "\t" << (a.built ? "built" : "not built") << "\t"
              << (a.available ? "available" : "unavailable: " + a.reason) << "\n"
              << "  " << b.description << "\n"
              << "  supports: " << supports_text(b.supports) << "\n";
  }
  std::cout << "cuda\t"
            << (cuda.built ? "built (runtime " + std::to_string(cuda.runtime_version) + ")"
                           : "not built")
            << "\t" << cuda.devices.size() << " device(s)"
            << (cuda.reason.empty() ? "" : ": " + cuda.reason) << "\n";
  return kOk;
}

}  // namespace tpusim::cli
