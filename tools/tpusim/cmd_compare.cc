// tpusim compare: the same training run on several backends, from the same initial weights and
// the same batches, and how far apart they end: per-step loss differences and per-variable max
// absolute and relative differences, with a verdict against tolerances and against the rounding
// baseline (how far the cpu drifts from itself when its initial weights are one ulp apart).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/jobs/compare_job.h"
#include "estimator/jobs/compare_numerics.h"
#include "estimator/jobs/compare_verdict.h"
#include "estimator/jobs/fashion_job.h"
#include "runtime/backend/registry.h"
#include "runtime/opcheck/harness.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/compare_options.h"
#include "tools/tpusim/compare_report.h"
#include "tools/tpusim/data_options.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {

using jobs::add_to_baseline;
using jobs::CompareBackend;
using jobs::CompareJob;
using jobs::CompareRun;
using jobs::Differences;
using jobs::differences;
using jobs::ensure_fashion_mnist;
using jobs::first_diverging_step;
using jobs::judge;
using jobs::kAutoBaselineRuns;
using jobs::max_or_nan;
using jobs::running_max;
using jobs::Tolerances;
using jobs::train_on;
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr char kCompareUsage[] =
    "usage: tpusim compare [--model NAME [--seq-length N] | --onnx FILE | --saved-model DIR]\n"
    "                      [--dtype-policy P[,P...]]\n"
    "                      [--backends tpusim,cpu[:fp32]] [--steps N] [--batch-size N]\n"
    "                      [--optimizer sgd|momentum|adam|lamb] [--learning-rate R]\n"
    "                      [--loss-tolerance X] [--weight-tolerance X] [--weight-atol X]\n"
    "                      [--baseline on|off] [--baseline-runs N] [--noise-factor X]\n"
    "                      [--json] [--report FILE]\n"
    "                      [--model-dir DIR]\n\n"
    "Trains N steps on each backend from the same initial weights and batches, then\n"
    "prints the per-step loss differences against the first backend, each variable's max\n"
    "absolute and relative difference, and a verdict. A step's loss agrees within\n"
    "loss-tolerance, a variable when its max |difference| <= weight-atol + weight-tolerance x\n"
    "its largest |value|; either also agrees within noise-factor x the rounding baseline's\n"
    "difference (the cpu trained from initial weights one ulp apart and summing in f32 as\n"
    "TPUs do: how far rounding alone carries this model by then). Exit status 1 when a\n"
    "difference exceeds its tolerance. With a dtype policy per backend (cpu,cpu and\n"
    "float32,mixed_bfloat16) it tells how far mixed precision moves training against how\n"
    "far rounding alone does.\n";

// Which runs compare makes beside the job they share.
struct ComparePlan {
  std::vector<CompareBackend> backends;  // the first the reference
  bool with_baseline = false;
  std::optional<uint32_t> baseline_runs;  // nullopt: auto
  bool policies_differ = false;           // a dtype policy per backend
  bool keep_runs = false;                 // --model-dir: the runs stay
};

// --backends, --baseline and --baseline-runs.
Refused backends_from(const po::variables_map& vm, ComparePlan* plan) {
  for (const absl::string_view name : absl::StrSplit(vm["backends"].as<std::string>(), ',')) {
    auto backend = parse_backend(std::string(name));
    if (!backend.ok()) return usage_problem(backend.status());
    plan->backends.push_back(*backend);
  }
  if (plan->backends.size() < 2) return usage_problem("--backends needs at least two backends");
  const std::string baseline_flag = vm["baseline"].as<std::string>();
  const std::optional<bool> with_baseline = kOnOff.parse(baseline_flag);
  if (!with_baseline)
    return usage_problem(str_cat("--baseline is on or off (got '", baseline_flag, "')"));
  plan->with_baseline = *with_baseline;
  auto baseline_runs = parse_baseline_runs(vm["baseline-runs"].as<std::string>());
  if (!baseline_runs.ok()) return usage_problem(baseline_runs.status());
  plan->baseline_runs = *baseline_runs;
  return std::nullopt;
}

// The rate, steps, batch and tolerances in range.
Refused check_numbers(const CompareJob& job, const CompareFlags& f) {
  if (!(job.optimizer.learning_rate.initial > 0)) {
    return usage_problem(
        str_cat("--learning-rate must be > 0 (got ", job.optimizer.learning_rate.initial, ")"));
  }
  if (job.steps < 1) return usage_problem(str_cat("--steps must be >= 1 (got ", job.steps, ")"));
  if (job.batch < 1)
    return usage_problem(str_cat("--batch-size must be >= 1 (got ", job.batch, ")"));
  const std::pair<const char*, double> nonnegative[] = {{"--loss-tolerance", f.loss_tol},
                                                        {"--weight-tolerance", f.weight_tol},
                                                        {"--weight-atol", f.weight_atol},
                                                        {"--noise-factor", f.factor}};
  for (const auto& [flag, value] : nonnegative) {
    if (!(value >= 0)) return usage_problem(str_cat(flag, " must be >= 0 (got ", value, ")"));
  }
  return std::nullopt;
}

// The folder the runs go under: --model-dir (which must be empty), else a new temporary one.
Refused runs_root_from(const po::variables_map& vm, CompareJob* job, ComparePlan* plan) {
  plan->keep_runs = vm.count("model-dir") > 0;
  if (plan->keep_runs) {
    job->root = vm["model-dir"].as<std::string>();
    std::error_code ec;
    if (fs::exists(job->root, ec) && !fs::is_empty(job->root, ec)) {
      return usage_problem(str_cat("--model-dir ", job->root.string(),
                                   " is not empty (compare trains every backend from the start)"));
    }
  } else {
    // A folder of its own (mkdtemp): a leftover of a killed run with the same pid would
    // otherwise be resumed from.
    std::string pattern = (fs::temp_directory_path() / "tpusim-compare-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      return failure_of(
          str_cat("cannot make a temporary folder ", pattern, ": ", std::strerror(errno)));
    job->root = pattern;
  }
  return std::nullopt;
}

// A zoo model's data: a BERT's records (made when missing), as train reads them, or the
// model's published images.
Refused zoo_inputs_from(const po::variables_map& vm, CompareJob* job) {
  auto seq_length = seq_length_from(vm, job->model);
  if (!seq_length.ok()) return usage_problem(seq_length.status());
  if (*seq_length > 0) {  // a BERT: its records (made when missing), as train reads them
    auto bert = bert_data_from(vm, job->data, job->model, *seq_length);
    if (!bert.ok()) return usage_problem(bert.status());
    if (auto s = jobs::ensure_bert_records(*bert, log_to_stderr); !s.ok()) return failure_of(s);
    job->bert = *bert;
  } else {  // synthetic images are the model's published ones
    if (auto s = jobs::use_model_inputs(job->model, !vm["image-size"].defaulted(), &job->data);
        !s.ok())
      return usage_problem(s);
    if (auto s = ensure_fashion_mnist(job->data, log_to_stderr); !s.ok()) return failure_of(s);
  }
  return std::nullopt;
}

// The job and the plan from the flags (the data downloaded when missing), or why not.
Refused compare_job_from(const po::variables_map& vm, const CompareFlags& f, CompareJob* job,
                         ComparePlan* plan) {
  if (Refused r = backends_from(vm, plan)) return r;
  auto kind = runtime::optimizer_kind(vm["optimizer"].as<std::string>());
  if (!kind.ok()) return usage_problem(kind.status());
  const float learning_rate = job->optimizer.learning_rate.initial;
  job->optimizer = runtime::optimizer_defaults(*kind);  // LAMB's epsilon is 1e-6
  job->optimizer.learning_rate.initial = learning_rate;
  auto policies_differ = assign_policies(vm["dtype-policy"].as<std::string>(), &plan->backends);
  if (!policies_differ.ok()) return usage_problem(policies_differ.status());
  plan->policies_differ = *policies_differ;
  const runtime::models::DTypePolicy first = plan->backends[0].policy;
  if (!plan->policies_differ && first != runtime::models::DTypePolicy::kFloat32)
    job->policy_note = str_cat(" (", runtime::models::dtype_policy_name(first), ")");
  if (Refused r = check_numbers(*job, f)) return r;
  for (const auto& b : plan->backends) {  // a backend that cannot run here (no GPU) says so first
    auto made = runtime::make_backend(b.name);
    if (!made.ok()) return failure_of(made.status());
  }
  auto data = fashion_data_from(vm, /*synthetic_allowed=*/true);
  if (!data.ok()) return usage_problem(data.status());
  job->data = *data;
  if (names_imported_model(vm)) {  // an imported model: the file's weights, its images
    if (Refused r = imported_model_from(vm, &job->imported)) return r;
    auto named = named_data_from(vm, job->data, *job->imported);
    if (!named.ok()) return usage_problem(named.status());
    job->named = *named;
    if (!job->named.has_value()) {
      if (auto s =
              jobs::use_imported_inputs(*job->imported, !vm["image-size"].defaulted(), &job->data);
          !s.ok())
        return usage_problem(s);
      if (auto s = ensure_fashion_mnist(job->data, log_to_stderr); !s.ok()) return failure_of(s);
    }
    job->model = job->imported->name;
    for (const auto& b : plan->backends) {
      if (auto s = jobs::check_imported_policy(*job->imported, b.policy); !s.ok())
        return usage_problem(s);
    }
  } else if (auto s = check_zoo_inputs(vm, job->data); !s.ok()) {
    return usage_problem(s);
  } else if (Refused r = zoo_inputs_from(vm, job)) {
    return r;
  }
  auto slice = config::load_slice(job->slice);
  if (!slice.ok()) return failure_of(slice.status());
  job->replicas = (*slice)->cores;
  if (job->imported.has_value()) {  // a saved model's graph fixes the batch a replica
    auto batch = jobs::imported_global_batch(*job->imported, job->batch,
                                             !vm["batch-size"].defaulted(), job->replicas);
    if (!batch.ok()) return usage_problem(batch.status());
    job->batch = *batch;
  }
  return runs_root_from(vm, job, plan);
}

// Removes the runs' temporary folder when compare ends (nothing when `root` is empty).
struct RemoveRoot {
  fs::path root;
  ~RemoveRoot() {
    std::error_code ec;
    if (!root.empty()) fs::remove_all(root, ec);
  }
};

// Trains the job on every backend, in order.
Refused train_every_backend(const CompareJob& job, const ComparePlan& plan,
                            std::vector<CompareRun>* runs) {
  for (size_t k = 0; k < plan.backends.size(); ++k) {
    const CompareBackend& backend = plan.backends[k];
    auto run = train_on(job, backend, str_cat(k, "-", backend.name), std::nullopt);
    if (!run.ok())
      return failure_of(str_cat("training on ", backend.label, ": ", run.status().message()));
    runs->push_back(*std::move(run));
  }
  return std::nullopt;
}

// The rounding baseline: the cpu against itself from initial weights one ulp apart, in the
// reference's precision (tpusim's is mxu) and dtype policy.
struct RoundingBaseline {
  CompareBackend cpu;
  std::optional<size_t> cpu_run;  // the index of its run from the model's own weights in runs,
  std::optional<CompareRun> own;  // or that run made for the baseline alone
  Differences drift;
  uint32_t nudges = 0;  // the nudged runs so far
};

CompareBackend baseline_backend(const ComparePlan& plan) {
  const std::string& reference = runtime::reference_backend().name;
  const CompareBackend& first = plan.backends[0];
  CompareBackend cpu{reference, first.precision,
                     str_cat(reference, ":", runtime::kPrecisions.name(first.precision)),
                     first.policy};
  if (plan.policies_differ)
    cpu.label += str_cat("@", runtime::models::dtype_policy_name(cpu.policy));
  return cpu;
}

// Takes the baseline to `count` nudges.
absl::Status nudge_to(const CompareJob& job, const CompareFlags& f,
                      const std::vector<CompareRun>& runs, uint32_t count,
                      RoundingBaseline* baseline) {
  const CompareRun& plain = baseline->cpu_run ? runs[*baseline->cpu_run] : *baseline->own;
  absl::Status st = add_to_baseline(job, baseline->cpu, plain, baseline->nudges, count,
                                    f.weight_tol, f.weight_atol, &baseline->drift);
  baseline->nudges = count;
  return st;
}

// The baseline's cpu run from the model's own weights (one of `runs` when a backend is that cpu),
// then its first nudges: --baseline-runs of them, or one for auto.
Refused start_baseline(const CompareJob& job, const ComparePlan& plan, const CompareFlags& f,
                       const std::vector<CompareRun>& runs, RoundingBaseline* baseline) {
  for (size_t k = 0; k < plan.backends.size() && !baseline->cpu_run; ++k) {
    const CompareBackend& b = plan.backends[k];
    if (b.name == baseline->cpu.name && b.precision == baseline->cpu.precision &&
        b.policy == baseline->cpu.policy)
      baseline->cpu_run = k;
  }
  if (!baseline->cpu_run) {
    auto run = train_on(job, baseline->cpu, "baseline-cpu", std::nullopt);
    if (!run.ok()) return failure_of(str_cat("the baseline's cpu run: ", run.status().message()));
    baseline->own = *std::move(run);
  }
  if (absl::Status st = nudge_to(job, f, runs, plan.baseline_runs.value_or(1), baseline); !st.ok())
    return failure_of(st);
  return std::nullopt;
}

// Every run judged against the reference: the report's "against", and whether all agree.
struct CompareVerdicts {
  nlohmann::ordered_json against;
  bool ok = false;
};

bool judge_all(const std::vector<CompareRun>& runs, const std::vector<Differences>& diffs,
               const RoundingBaseline* baseline, const Tolerances& tol,
               nlohmann::ordered_json* against) {
  bool all = true;
  for (size_t k = 1; k < runs.size(); ++k) {
    (*against)[runs[k].backend] = judge(runs[k].result.losses, runs[0].result.losses, diffs[k - 1],
                                        baseline ? &baseline->drift : nullptr, tol);
    all = all && (*against)[runs[k].backend]["verdict"] == "agree";
  }
  return all;
}

// Each run's differences from the reference, judged. --baseline-runs auto: a difference over
// one draw of the baseline is judged again against the largest drift of three. The limits only
// grow, so what agreed still agrees.
Refused judge_runs(const CompareJob& job, const ComparePlan& plan, const CompareFlags& f,
                   const std::vector<CompareRun>& runs, RoundingBaseline* baseline,
                   CompareVerdicts* verdicts) {
  std::vector<Differences> diffs;
  for (size_t k = 1; k < runs.size(); ++k) {
    auto d = differences(runs[k], runs[0], f.weight_tol, f.weight_atol);
    if (!d.ok()) return failure_of(d.status());
    diffs.push_back(*std::move(d));
  }
  const Tolerances tol{f.loss_tol, f.weight_tol, f.weight_atol, f.factor};
  verdicts->ok = judge_all(runs, diffs, baseline, tol, &verdicts->against);
  if (!verdicts->ok && baseline != nullptr && !plan.baseline_runs) {
    if (absl::Status st = nudge_to(job, f, runs, kAutoBaselineRuns, baseline); !st.ok())
      return failure_of(st);
    verdicts->ok = judge_all(runs, diffs, baseline, tol, &verdicts->against);
  }
  return std::nullopt;
}

// The JSON report (--json and --report).
nlohmann::ordered_json compare_report(const CompareJob& job, const ComparePlan& plan,
                                      const CompareFlags& f, const std::vector<CompareRun>& runs,
                                      const CompareVerdicts& verdicts,
                                      const RoundingBaseline* baseline) {
  double max_loss = 0;
  for (const auto& [label, entry] : verdicts.against.items())
    max_loss = max_or_nan(max_loss, entry["max_loss_difference"].get<double>());
  nlohmann::ordered_json out = {
      {"model", job.model},
      {"dtype_policy", runtime::models::dtype_policy_name(plan.backends[0].policy)},
      {"steps", job.steps},
      {"batch_size", job.batch},
      {"reference", plan.backends[0].label},
      {"verdict", verdicts.ok ? "agree" : "differ"},
      {"max_loss_difference", max_loss}};
  if (baseline != nullptr) {
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    for (const auto& [name, w] : baseline->drift.variables)
      vars[name] = {{"max_abs", w.max_abs}, {"max_rel", w.max_rel}};
    out["baseline"] = {{"backend", baseline->cpu.label},
                       {"runs", baseline->nudges},
                       {"noise_factor", f.factor},
                       {"loss_differences", baseline->drift.losses},
                       {"variables", vars}};
  }
  out["against"] = verdicts.against;
  if (const int64_t s = first_diverging_step(runs[0].result.losses); s >= 0)
    out["diverges_at_step"] = s + 1;
  return out;
}

// The comparison as text: the baseline, each run's judgement, and a note when training diverges.
void print_comparison(const CompareJob& job, const CompareFlags& f,
                      const std::vector<CompareRun>& runs, const CompareVerdicts& verdicts,
                      const RoundingBaseline* baseline) {
  if (baseline != nullptr) {
    const std::vector<double> drift = running_max(baseline->drift.losses);
    std::cout << fmt::format(
        "rounding baseline: {} from initial weights one ulp apart{}, summing in f32, {} steps: "
        "its loss up to {:.2e} from its own\n",
        baseline->cpu.label,
        baseline->nudges > 1 ? fmt::format(" (the largest drift of {} nudges)", baseline->nudges)
                             : "",
        job.steps, drift.empty() ? 0.0 : drift.back());
  }
  const Tolerances tol{f.loss_tol, f.weight_tol, f.weight_atol, f.factor};
  for (size_t k = 1; k < runs.size(); ++k) {
    print_judgement(verdicts.against[runs[k].backend],
                    fmt::format("{} vs {} over {} steps of {}{} (batch {})", runs[k].backend,
                                runs[0].backend, job.steps, job.model, job.policy_note, job.batch),
                    tol, baseline != nullptr);
  }
  const std::vector<float>& ref_losses = runs[0].result.losses;
  if (const int64_t s = first_diverging_step(ref_losses); s >= 0) {
    std::cout << fmt::format(
        "note: {}'s loss goes from {:.4g} at step 1 to {:.4g} at step {}: the training "
        "diverges, which magnifies any rounding until the backends part; a smaller "
        "--learning-rate keeps the runs comparable (compare's default, 0.05, is an SGD rate)\n",
        runs[0].backend, ref_losses[0], ref_losses[static_cast<size_t>(s)], s + 1);
  }
}

}  // namespace

int run_compare(const std::vector<std::string>& args) {
  CompareJob job;
  job.log = log_to_stderr;
  CompareFlags flags;
  const po::options_description options = compare_options(&job, &flags);
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kCompareUsage, &vm); rc >= 0) return rc;
  ComparePlan plan;
  if (Refused r = compare_job_from(vm, flags, &job, &plan)) return refuse(*r, kCompareUsage);
  if (absl::Status s = check_output_destinations(vm); !s.ok())
    return failure(std::string(s.message()));
  const RemoveRoot remove_root{plan.keep_runs ? fs::path() : job.root};

  std::vector<CompareRun> runs;
  if (Refused r = train_every_backend(job, plan, &runs)) return refuse(*r, kCompareUsage);
  std::optional<RoundingBaseline> baseline;
  if (plan.with_baseline) {
    baseline.emplace();
    baseline->cpu = baseline_backend(plan);
    if (Refused r = start_baseline(job, plan, flags, runs, &*baseline))
      return refuse(*r, kCompareUsage);
  }
  RoundingBaseline* drift = baseline ? &*baseline : nullptr;
  CompareVerdicts verdicts;
  if (Refused r = judge_runs(job, plan, flags, runs, drift, &verdicts))
    return refuse(*r, kCompareUsage);

  const nlohmann::ordered_json out = compare_report(job, plan, flags, runs, verdicts, drift);
  if (vm["json"].as<bool>()) {
    std::cout << json_text(out) << "\n";
  } else {
    print_comparison(job, flags, runs, verdicts, drift);
  }
  if (vm.count("report") > 0) {
    const absl::Status written =
        write_report_file(vm["report"].as<std::string>(), json_text(out) + "\n");
    if (!written.ok()) return failure(std::string(written.message()));
  }
  return verdicts.ok ? kOk : kFailed;
}

}  // namespace tpusim::cli
