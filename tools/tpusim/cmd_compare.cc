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
#include "runtime/backend/registry.h"
#include "runtime/opcheck/harness.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "estimator/jobs/compare_job.h"
#include "estimator/jobs/compare_numerics.h"
#include "estimator/jobs/compare_verdict.h"
#include "tools/tpusim/compare_options.h"
#include "tools/tpusim/compare_report.h"
#include "tools/tpusim/data_options.h"
#include "estimator/jobs/fashion_job.h"
#include "tools/tpusim/options.h"

namespace tpusim::cli {

using jobs::CompareBackend;
using jobs::CompareJob;
using jobs::CompareRun;
using jobs::Differences;
using jobs::Tolerances;
using jobs::add_to_baseline;
using jobs::differences;
using jobs::ensure_fashion_mnist;
using jobs::first_diverging_step;
using jobs::judge;
using jobs::kAutoBaselineRuns;
using jobs::max_or_nan;
using jobs::running_max;
using jobs::train_on;
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

}  // namespace

int run_compare(const std::vector<std::string>& args) {
  po::options_description options("options");
  CompareJob job;
  job.log = log_to_stderr;
  double loss_tol = 0, weight_tol = 0, weight_atol = 0, factor = 0;

  options.add_options()("model", po::value<std::string>(&job.model)->default_value("mlp"),
                        "zoo model")(
      "backends", po::value<std::string>()->default_value("tpusim,cpu"),
      str_cat("comma-separated, the first the reference: ", runtime::backend_names(", "),
              "; each in mxu precision (bf16 products, like the MXU's) unless named NAME:fp32 "
              "(`tpusim backends` lists each one's precisions)")
          .c_str())("steps", po::value<int64_t>(&job.steps)->default_value(20),
                    "training steps on each")(
      "optimizer", po::value<std::string>()->default_value("sgd"), "sgd | momentum | adam")(
      "learning-rate", po::value<float>(&job.optimizer.learning_rate.initial)->default_value(0.05f),
      "the optimizer's rate")("batch-size", po::value<int64_t>(&job.batch)->default_value(256),
                              "global batch size")(
      "config", po::value<std::string>(&job.slice)->default_value("v3-8"),
      "the tpusim backend's slice")("loss-tolerance",
                                    po::value<double>(&loss_tol)->default_value(1e-5),
                                    "|loss difference| accepted at any step")(
      "weight-tolerance", po::value<double>(&weight_tol)->default_value(1e-3),
      "largest acceptable weight difference at the end, relative to the variable's largest value")(
      "weight-atol", po::value<double>(&weight_atol)->default_value(1e-6),
      "absolute weight difference accepted (a variable agrees when its max difference is "
      "<= weight-atol + weight-tolerance x its largest value): variables that stay near zero")(
      "baseline", po::value<std::string>()->default_value("on"),
      "on | off: also train the cpu from initial weights one ulp apart, and accept differences "
      "within --noise-factor times the drift that causes")(
      "noise-factor", po::value<double>(&factor)->default_value(5),
      "how many times the rounding baseline's drift a difference may be")(
      "baseline-runs", po::value<std::string>()->default_value("auto"),
      "N | auto: nudged runs in the baseline, each with its own pattern of ulp signs, the "
      "baseline their largest drift; auto: one, and three when a backend differs by one")(
      "report", po::value<std::string>(), "also write the JSON report to this file")(
      "model-dir", po::value<std::string>(),
      "a new folder to keep the runs in (default: a temporary one, removed)")(
      "json", po::bool_switch(), "print JSON");
  options.add_options()(
      "dtype-policy", po::value<std::string>()->default_value("float32"),
      "float32 | mixed_bfloat16 (bf16 activations and MXU operands, f32 variables and loss) for "
      "every run, or one per backend to compare the policies (--backends cpu,cpu "
      "--dtype-policy float32,mixed_bfloat16)");
  add_data_options(options);
  const std::string usage =
      "usage: tpusim compare [--model NAME] [--dtype-policy P[,P...]]\n"
      "                      [--backends tpusim,cpu[:fp32]] [--steps N] [--batch-size N]\n"
      "                      [--optimizer sgd|momentum|adam] [--learning-rate R]\n"
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
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  std::vector<CompareBackend> backends;
  for (const absl::string_view name : absl::StrSplit(vm["backends"].as<std::string>(), ',')) {
    auto backend = parse_backend(std::string(name));
    if (!backend.ok()) return usage_error(std::string(backend.status().message()), usage);
    backends.push_back(*backend);
  }
  if (backends.size() < 2) return usage_error("--backends needs at least two backends", usage);
  const std::string baseline_flag = vm["baseline"].as<std::string>();
  if (baseline_flag != "on" && baseline_flag != "off")
    return usage_error(str_cat("--baseline is on or off (got '", baseline_flag, "')"), usage);
  const bool with_baseline = baseline_flag == "on";
  auto baseline_runs = parse_baseline_runs(vm["baseline-runs"].as<std::string>());
  if (!baseline_runs.ok()) return usage_error(std::string(baseline_runs.status().message()), usage);
  auto kind = runtime::optimizer_kind(vm["optimizer"].as<std::string>());
  if (!kind.ok()) return usage_error(std::string(kind.status().message()), usage);
  job.optimizer.kind = *kind;
  auto policies_differ = assign_policies(vm["dtype-policy"].as<std::string>(), &backends);
  if (!policies_differ.ok())
    return usage_error(std::string(policies_differ.status().message()), usage);
  if (!*policies_differ && backends[0].policy != runtime::models::DTypePolicy::kFloat32)
    job.policy_note = str_cat(" (", runtime::models::dtype_policy_name(backends[0].policy), ")");
  if (!(job.optimizer.learning_rate.initial > 0)) {
    return usage_error(
        str_cat("--learning-rate must be > 0 (got ", job.optimizer.learning_rate.initial, ")"),
        usage);
  }
  if (job.steps < 1)
    return usage_error(str_cat("--steps must be >= 1 (got ", job.steps, ")"), usage);
  if (job.batch < 1)
    return usage_error(str_cat("--batch-size must be >= 1 (got ", job.batch, ")"), usage);
  const std::pair<const char*, double> nonnegative[] = {{"--loss-tolerance", loss_tol},
                                                        {"--weight-tolerance", weight_tol},
                                                        {"--weight-atol", weight_atol},
                                                        {"--noise-factor", factor}};
  for (const auto& [flag, value] : nonnegative) {
    if (!(value >= 0)) return usage_error(str_cat(flag, " must be >= 0 (got ", value, ")"), usage);
  }
  for (const auto& b : backends) {  // a backend that cannot run here (no GPU) says so first
    auto made = runtime::make_backend(b.name);
    if (!made.ok()) return failure(std::string(made.status().message()));
  }
  auto data = fashion_data_from(vm);
  if (!data.ok()) return usage_error(std::string(data.status().message()), usage);
  job.data = *data;
  if (auto s = ensure_fashion_mnist(job.data, log_to_stderr); !s.ok()) return failure(std::string(s.message()));
  auto slice = config::load_slice(job.slice);
  if (!slice.ok()) return failure(std::string(slice.status().message()));
  job.replicas = (*slice)->cores;
  const bool keep_runs = vm.count("model-dir") > 0;
  if (keep_runs) {
    job.root = vm["model-dir"].as<std::string>();
    std::error_code ec;
    if (fs::exists(job.root, ec) && !fs::is_empty(job.root, ec)) {
      return usage_error(str_cat("--model-dir ", job.root.string(),
                                 " is not empty (compare trains every backend from the start)"),
                         usage);
    }
  } else {
    // A folder of its own (mkdtemp): a leftover of a killed run with the same pid would
    // otherwise be resumed from.
    std::string pattern = (fs::temp_directory_path() / "tpusim-compare-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      return failure(
          str_cat("cannot make a temporary folder ", pattern, ": ", std::strerror(errno)));
    job.root = pattern;
  }
  struct RemoveRoot {
    fs::path root;
    ~RemoveRoot() {
      std::error_code ec;
      if (!root.empty()) fs::remove_all(root, ec);
    }
  } remove_root{keep_runs ? fs::path() : job.root};

  std::vector<CompareRun> runs;
  for (size_t k = 0; k < backends.size(); ++k) {
    auto run = train_on(job, backends[k], str_cat(k, "-", backends[k].name), std::nullopt);
    if (!run.ok())
      return failure(str_cat("training on ", backends[k].label, ": ", run.status().message()));
    runs.push_back(*std::move(run));
  }
  // The rounding baseline: the cpu against itself from initial weights one ulp apart, in the
  // reference's precision (tpusim's is mxu) and dtype policy.
  std::optional<Differences> baseline;
  uint32_t nudges = 0;  // the baseline's nudged runs so far
  const std::string& reference = runtime::reference_backend().name;
  CompareBackend baseline_cpu{reference, backends[0].precision,
                              reference + ":" + backends[0].precision, backends[0].policy};
  if (*policies_differ)
    baseline_cpu.label += str_cat("@", runtime::models::dtype_policy_name(baseline_cpu.policy));
  const CompareRun* cpu = nullptr;  // the baseline's run from the model's own weights
  std::optional<CompareRun> plain;
  if (with_baseline) {
    for (size_t k = 0; k < backends.size() && cpu == nullptr; ++k) {
      if (backends[k].name == reference && backends[k].precision == baseline_cpu.precision &&
          backends[k].policy == baseline_cpu.policy)
        cpu = &runs[k];
    }
    if (cpu == nullptr) {
      auto run = train_on(job, baseline_cpu, "baseline-cpu", std::nullopt);
      if (!run.ok()) return failure(str_cat("the baseline's cpu run: ", run.status().message()));
      plain = *std::move(run);
      cpu = &*plain;
    }
    baseline.emplace();
  }
  // Takes the baseline to `count` nudges.
  auto nudge_to = [&](uint32_t count) -> absl::Status {
    absl::Status st = add_to_baseline(job, baseline_cpu, *cpu, nudges, count, weight_tol,
                                      weight_atol, &*baseline);
    nudges = count;
    return st;
  };
  if (baseline) {
    if (absl::Status st = nudge_to(baseline_runs->value_or(1)); !st.ok())
      return failure(std::string(st.message()));
  }

  std::vector<Differences> diffs;
  for (size_t k = 1; k < runs.size(); ++k) {
    auto d = differences(runs[k], runs[0], weight_tol, weight_atol);
    if (!d.ok()) return failure(std::string(d.status().message()));
    diffs.push_back(*std::move(d));
  }
  const Tolerances tol{loss_tol, weight_tol, weight_atol, factor};
  nlohmann::ordered_json against;
  auto judge_all = [&] {
    bool all = true;
    for (size_t k = 1; k < runs.size(); ++k) {
      against[runs[k].backend] = judge(runs[k].result.losses, runs[0].result.losses, diffs[k - 1],
                                       baseline ? &*baseline : nullptr, tol);
      all = all && against[runs[k].backend]["verdict"] == "agree";
    }
    return all;
  };
  bool ok = judge_all();
  // --baseline-runs auto: a difference over one draw of the baseline is judged again against
  // the largest drift of three. The limits only grow, so what agreed still agrees.
  if (!ok && baseline && !*baseline_runs) {
    if (absl::Status st = nudge_to(kAutoBaselineRuns); !st.ok())
      return failure(std::string(st.message()));
    ok = judge_all();
  }

  const bool json = vm["json"].as<bool>();
  double max_loss = 0;
  for (const auto& [label, entry] : against.items())
    max_loss = max_or_nan(max_loss, entry["max_loss_difference"].get<double>());
  nlohmann::ordered_json out = {
      {"model", job.model},
      {"dtype_policy", runtime::models::dtype_policy_name(backends[0].policy)},
      {"steps", job.steps},
      {"batch_size", job.batch},
      {"reference", backends[0].label},
      {"verdict", ok ? "agree" : "differ"},
      {"max_loss_difference", max_loss}};
  if (baseline) {
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    for (const auto& [name, w] : baseline->variables)
      vars[name] = {{"max_abs", w.max_abs}, {"max_rel", w.max_rel}};
    out["baseline"] = {{"backend", baseline_cpu.label},
                       {"runs", nudges},
                       {"noise_factor", factor},
                       {"loss_differences", baseline->losses},
                       {"variables", vars}};
    if (!json) {
      const std::vector<double> drift = running_max(baseline->losses);
      std::cout << fmt::format(
          "rounding baseline: {} from initial weights one ulp apart{}, summing in f32, {} steps: "
          "its loss up to {:.2e} from its own\n",
          baseline_cpu.label,
          nudges > 1 ? fmt::format(" (the largest drift of {} nudges)", nudges) : "", job.steps,
          drift.empty() ? 0.0 : drift.back());
    }
  }
  out["against"] = against;
  if (!json) {
    for (size_t k = 1; k < runs.size(); ++k) {
      print_judgement(
          against[runs[k].backend],
          fmt::format("{} vs {} over {} steps of {}{} (batch {})", runs[k].backend, runs[0].backend,
                      job.steps, job.model, job.policy_note, job.batch),
          tol, baseline.has_value());
    }
  }
  const std::vector<float>& ref_losses = runs[0].result.losses;
  if (const int64_t s = first_diverging_step(ref_losses); s >= 0) {
    out["diverges_at_step"] = s + 1;
    if (!json) {
      std::cout << fmt::format(
          "note: {}'s loss goes from {:.4g} at step 1 to {:.4g} at step {}: the training "
          "diverges, which magnifies any rounding until the backends part; a smaller "
          "--learning-rate keeps the runs comparable (compare's default, 0.05, is an SGD rate)\n",
          runs[0].backend, ref_losses[0], ref_losses[static_cast<size_t>(s)], s + 1);
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
  if (vm.count("report") > 0) {
    const std::string path = vm["report"].as<std::string>();
    std::ofstream file(path);
    file << out.dump(2) << "\n";
    if (!file) return failure(str_cat("cannot write the report to ", path));
  }
  return ok ? kOk : kFailed;
}

}  // namespace tpusim::cli
