// tpusim opcheck: the cross-device numerics harness (runtime/opcheck).
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/opcheck/harness.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {

namespace po = boost::program_options;

namespace {

using runtime::opcheck::BackendSpec;
using runtime::opcheck::CaseResult;
using runtime::opcheck::OpCase;

po::options_description opcheck_options() {
  po::options_description options("options");
  options.add_options()("backends", po::value<std::string>()->default_value("tpusim,cpu:mxu"),
                        "comma-separated backends, each NAME or NAME:PRECISION (fp32 | mxu)")(
      "ops", po::value<std::string>()->default_value(".*"),
      "regular expression the op names must match")(
      "reference", po::value<std::string>()->default_value(runtime::reference_backend().name),
      "the backend compared against: NAME[:PRECISION]")(
      "seed", po::value<uint32_t>()->default_value(1), "seed of the inputs and cotangents");
  add_config_flag(options);
  add_json_flag(options);
  return options;
}

constexpr char kOpcheckUsage[] =
    "usage: tpusim opcheck [--backends tpusim,cpu:mxu] [--ops PATTERN] [--reference cpu] "
    "[--config SLICE] [--json]\n\n"
    "Runs every op case (one per op and representative shape) on each backend, forward and\n"
    "backward, and compares it with the reference (the cpu backend in fp32 by default). A case "
    "passes when its largest "
    "error\n"
    "relative to the reference's largest magnitude is within the op's tolerance (from bf16's or\n"
    "f32's epsilon and the reduction length). A case a backend cannot run is listed as an\n"
    "ERROR with the reason, and the others still run. Exits 1 when any case fails.\n";

// What opcheck runs: the cases whose op matches `pattern`, on each backend against the reference.
struct OpcheckJob {
  std::vector<BackendSpec> backends;
  BackendSpec reference;
  std::regex pattern;
  uint32_t seed = 1;
  bool json = false;
};

// --backends, --reference and --ops, each backend on --config's slice.
Refused backends_and_pattern(const po::variables_map& vm, OpcheckJob* job) {
  std::string list = vm["backends"].as<std::string>();
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    auto spec = runtime::opcheck::parse_backend_spec(list.substr(start, comma - start));
    if (!spec.ok()) return usage_problem(spec.status());
    spec->slice = vm["config"].as<std::string>();
    job->backends.push_back(*spec);
    start = comma + 1;
  }
  auto reference = runtime::opcheck::parse_backend_spec(vm["reference"].as<std::string>());
  if (!reference.ok()) return usage_problem(reference.status());
  job->reference = *reference;
  job->reference.slice = vm["config"].as<std::string>();
  // libstdc++ compiles and runs a regex by recursion, a frame or more a term: a pattern of
  // 100,000 terms overflowed the stack. Op names are a few dozen characters; so is a pattern.
  constexpr size_t kMaxPatternBytes = 1000;
  const std::string& ops = vm["ops"].as<std::string>();
  if (ops.size() > kMaxPatternBytes) {
    return usage_problem(str_cat("--ops is ", ops.size(), " bytes; a pattern over op names may be ",
                                 kMaxPatternBytes, " at most"));
  }
  try {
    job->pattern = std::regex(ops);
  } catch (const std::regex_error& e) {
    return usage_problem(str_cat("--ops is not a regular expression: ", e.what()));
  }
  // A pattern that selects nothing (a typo, a comma list) would pass a check of nothing.
  const auto& cases = runtime::opcheck::all_cases();
  if (std::none_of(cases.begin(), cases.end(),
                   [&](const auto& c) { return std::regex_search(c.op, job->pattern); })) {
    return usage_problem(str_cat("--ops '", ops, "' matches none of the ", cases.size(),
                                 " cases' op names (a regular expression over names such as "
                                 "'matmul' or 'conv2d': 'matmul|conv2d')"));
  }
  return std::nullopt;
}

// The job from the flags, or why not. A backend that cannot be made at all (no GPU, a slice file
// missing) stops the run at once; one that fails a case is recorded as that case's error and the
// run goes on.
Refused opcheck_job_from(const po::variables_map& vm, OpcheckJob* job) {
  if (Refused r = backends_and_pattern(vm, job)) return r;
  job->seed = vm["seed"].as<uint32_t>();
  job->json = vm["json"].as<bool>();
  std::vector<BackendSpec> every = job->backends;
  every.push_back(job->reference);
  for (const auto& spec : every) {
    auto declared = runtime::find_backend(spec.name);
    const absl::Status usable = !declared.ok() ? declared.status()
                                : (*declared)->supports.runs_a_slice
                                    ? config::load_slice(spec.slice).status()
                                    : runtime::make_backend(spec.name).status();
    if (!usable.ok()) return failure_of(str_cat(spec.label(), ": ", usable.message()));
  }
  return std::nullopt;
}

// The verdicts so far.
struct OpcheckVerdicts {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  int failed = 0, total = 0;
  std::set<std::string> ops;
};

// A case `backend` could not run: a failure, with its error.
void record_error(const OpCase& c, const BackendSpec& backend, const absl::Status& status,
                  bool json, OpcheckVerdicts* v) {
  ++v->total;
  ++v->failed;
  v->ops.insert(c.op);
  const std::string error(status.message());
  v->cases.push_back({{"op", c.op},
                      {"backend", backend.label()},
                      {"shape", c.shape},
                      {"passed", false},
                      {"error", error}});
  if (!json) {
    std::cout << "ERROR " << std::left << std::setw(29) << c.op << std::setw(9) << backend.label()
              << c.shape << ": " << error << "\n";
  }
}

// One tensor's comparison with the reference.
void record_result(const CaseResult& r, bool json, OpcheckVerdicts* v) {
  ++v->total;
  v->failed += r.passed ? 0 : 1;
  v->ops.insert(r.op);
  v->cases.push_back({{"op", r.op},
                      {"backend", r.backend},
                      {"mode", r.mode},
                      {"shape", r.shape},
                      {"tensor", r.tensor},
                      {"max_abs_error", r.max_abs_error},
                      {"max_rel_error", r.max_rel_error},
                      {"ulp", r.ulp},
                      {"tolerance", r.tolerance},
                      {"passed", r.passed},
                      {"worst", r.worst}});
  if (!json) {
    std::cout << (r.passed ? "ok   " : "FAIL ") << std::left << std::setw(30) << r.op
              << std::setw(9) << r.backend << std::setw(9) << r.mode << std::setw(22) << r.tensor
              << " rel " << std::setw(11) << std::setprecision(3) << r.max_rel_error << " tol "
              << std::setw(9) << r.tolerance << "  " << r.shape
              << (r.passed ? "" : "  worst: " + r.worst) << "\n";
  }
}

void print_verdicts(const OpcheckJob& job, const OpcheckVerdicts& v) {
  if (job.json) {
    std::cout << json_text(nlohmann::ordered_json{{"reference", job.reference.label()},
                                                  {"cases", v.cases},
                                                  {"ops", v.ops.size()},
                                                  {"passed", v.total - v.failed},
                                                  {"failed", v.failed}})
              << "\n";
  } else {
    std::cout << (v.total - v.failed) << " passed, " << v.failed << " failed (" << v.ops.size()
              << " ops)\n";
  }
}

}  // namespace

int run_opcheck(const std::vector<std::string>& args) {
  const po::options_description options = opcheck_options();
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kOpcheckUsage, &vm); rc >= 0) return rc;
  OpcheckJob job;
  if (Refused r = opcheck_job_from(vm, &job)) return refuse(*r, kOpcheckUsage);
  OpcheckVerdicts verdicts;
  for (const auto& c : runtime::opcheck::all_cases()) {
    if (!std::regex_search(c.op, job.pattern)) continue;
    for (const auto& backend : job.backends) {
      auto results = runtime::opcheck::run_case(c, backend, job.seed, job.reference);
      if (!results.ok()) {
        record_error(c, backend, results.status(), job.json, &verdicts);
        continue;
      }
      for (const auto& r : *results) record_result(r, job.json, &verdicts);
    }
  }
  print_verdicts(job, verdicts);
  return verdicts.failed == 0 ? kOk : kFailed;
}

}  // namespace tpusim::cli
