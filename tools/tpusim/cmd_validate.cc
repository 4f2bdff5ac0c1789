// tpusim validate: the published TPU results, each run timing-only, predicted against measured.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "configs/loader.h"
#include "configs/overrides.h"
#include "estimator/jobs/validation.h"
#include "tools/studies/point_farm.h"
#include "tools/studies/subprocess.h"
#include "tools/studies/sweep_grid.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {
using studies::FarmJob;
using studies::FarmOptions;
using studies::FarmOutcome;
using studies::log_tail;
using studies::parse_sweep_axis;
using studies::PointFarm;

namespace po = boost::program_options;

namespace {

constexpr char kValidateUsage[] =
    "usage: tpusim validate [--case NAME]... [--steps N] [--set FIELD=VALUE]... [-j N] [--list] "
    "[--json]\n\n"
    "Runs each published case (a zoo model on a slice at the published global batch, timing-only\n"
    "on synthetic input, mixed_bfloat16 and momentum as the reference models; replicas folded on\n"
    "slices of several hosts) and prints the predicted step time and examples/s against the\n"
    "measured ones, with the error. Cases without a measured figure are predictions. A case whose\n"
    "model is not in the zoo yet is listed as pending. Each case runs in a process of its own\n"
    "(SystemC elaborates one slice per process), -j of them at once (default: one a host core;\n"
    "the predictions do not depend on it). docs/validation.md: the table and where each\n"
    "case's time goes. A full-size case takes minutes of host time. --set edits every case's\n"
    "slice config (chip.hbm.capacity_gib=16): what the published runs would do on\n"
    "another chip; the measured figures stay the real slices'. The prediction is the steady state\n"
    "the published rates measure, the steps between a loop's first (its batch crossing the link)\n"
    "and its last (the loop's host round trip); with --steps 1 or 2, the loop's average.\n";

po::options_description validate_options() {
  po::options_description options("options");
  options.add_options()("case", po::value<std::vector<std::string>>(),
                        "a case to run (repeatable; default: every case)")(
      "steps", po::value<int64_t>()->default_value(3),
      "training steps a case runs, in one loop (3 or more: the steady state)")(
      "set", po::value<std::vector<std::string>>(),
      "FIELD=VALUE: a slice config field every case's slice takes (repeatable)")(
      "jobs,j", po::value<int64_t>(),
      "cases run at once, each in a process of its own (1 to 256; default: the host's cores)")(
      "list", po::bool_switch(), "list the cases without running them");
  add_json_flag(options);
  add_report_flag(options);
  return options;
}

// The cases --case names (every case without it), or why not.
Refused cases_from(const po::variables_map& vm, std::vector<jobs::ValidationCase>* cases) {
  if (vm["steps"].as<int64_t>() < 1 || vm["steps"].as<int64_t>() > UINT32_MAX) {
    return Refusal{true, "--steps must be from 1 to 4294967295 (the steps of one loop)"};
  }
  if (vm.count("jobs") > 0 && (vm["jobs"].as<int64_t>() < 1 || vm["jobs"].as<int64_t>() > 256))
    return Refusal{true, "--jobs must be from 1 to 256"};
  if (vm.count("case") == 0) {
    *cases = jobs::validation_cases();
    return std::nullopt;
  }
  for (const std::string& name : vm["case"].as<std::vector<std::string>>()) {
    bool found = false;
    for (const auto& c : jobs::validation_cases()) {
      if (c.name != name) continue;
      cases->push_back(c);
      found = true;
    }
    if (found) continue;
    std::string names;
    for (const auto& c : jobs::validation_cases()) names += (names.empty() ? "" : ", ") + c.name;
    return Refusal{true, "no validation case '" + name + "' (cases: " + names + ")"};
  }
  return std::nullopt;
}

// The --set edits, each one slice config field and one value, checked against every case's
// slice; or why not.
Refused slice_edits_from(const po::variables_map& vm,
                         const std::vector<jobs::ValidationCase>& cases, jobs::SliceEdits* edits) {
  if (vm.count("set") == 0) return std::nullopt;
  for (const std::string& spec : vm["set"].as<std::vector<std::string>>()) {
    auto axis = parse_sweep_axis(spec);
    if (!axis.ok()) return Refusal{true, std::string(axis.status().message())};
    if (!axis->config || axis->values.size() != 1) {
      return Refusal{true, "--set '" + spec +
                               "': give one slice config field and one value "
                               "(chip.hbm.capacity_gib=16)"};
    }
    edits->emplace_back(axis->field, axis->values[0]);
  }
  for (const auto& c : cases) {
    auto slice = config::load_slice(c.slice);
    if (!slice.ok()) return Refusal{false, std::string(slice.status().message())};
    if (auto edited = config::with_overrides(**slice, *edits, c.slice); !edited.ok())
      return Refusal{true, std::string(edited.status().message())};
  }
  return std::nullopt;
}

nlohmann::ordered_json case_json(const jobs::ValidationCase& c) {
  nlohmann::ordered_json j = {{"name", c.name},
                              {"model", c.model},
                              {"slice", c.slice},
                              {"global_batch", c.global_batch},
                              {"measured_examples_per_second", nullptr},
                              {"source", c.source}};
  if (c.measured_examples_per_second > 0) {
    j["measured_examples_per_second"] = c.measured_examples_per_second;
    j["measured_step_seconds"] =
        static_cast<double>(c.global_batch) / c.measured_examples_per_second;
  }
  const std::string pending = jobs::validation_case_pending(c);
  j["pending"] =
      pending.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(pending);
  return j;
}

void log_line(const std::string& line) { log_to_stderr(line + "\n"); }

// Runs the case here (unless pending) and adds its prediction to `j`; false when it failed.
bool run_case(const jobs::ValidationCase& c, int64_t steps, const jobs::SliceEdits& edits,
              nlohmann::ordered_json& j) {
  if (!j["pending"].is_null()) return true;
  auto r = jobs::run_validation_case(c, steps, log_line, edits);
  if (!r.ok()) {
    j["error"] = std::string(r.status().message());
    return false;
  }
  j["predicted_step_seconds"] = r->step_seconds;
  j["steady_state"] = r->steady_state;
  j["loop_step_seconds"] = r->loop_step_seconds;
  j["predicted_examples_per_second"] = r->examples_per_second;
  j["mxu_utilization"] = r->mxu_utilization;
  j["host_seconds"] = r->host_seconds;
  j["step_time_error"] = nullptr;
  if (j.contains("measured_step_seconds"))
    j["step_time_error"] =
        jobs::step_time_error(r->step_seconds, j["measured_step_seconds"].get<double>());
  return true;
}

// The child process that runs case `c` (`tpusim validate --case NAME --report F`), its log and
// report in `dir`, named by its place `index` among the cases (a case named twice runs twice).
FarmJob case_job(const jobs::ValidationCase& c, size_t index, int64_t steps,
                 const jobs::SliceEdits& edits, const std::string& dir) {
  const std::string stem = fmt::format("{}/{:02}-{}", dir, index, c.name);
  FarmJob job;
  job.id = c.name;
  job.report = stem + ".json";
  job.log = stem + ".log";
  job.args = {"validate", "--case",  c.name, "--steps", std::to_string(steps),
              "--report", job.report};
  for (const auto& [field, value] : edits) {
    job.args.push_back("--set");
    job.args.push_back(field + "=" + value);
  }
  return job;
}

// Takes the case's entry from its child's report into `j`; false when the child failed.
bool take_child_report(const FarmJob& job, const FarmOutcome& outcome, nlohmann::ordered_json& j) {
  std::ifstream in(job.report);
  if (outcome.failure.empty() && in) {
    const nlohmann::ordered_json child = nlohmann::ordered_json::parse(in, nullptr, false);
    if (child.is_array() && child.size() == 1) {
      j = child[0];
      return outcome.exit_code == kOk;
    }
  }
  j["error"] = !outcome.failure.empty()
                   ? outcome.failure
                   : "exit " + std::to_string(outcome.exit_code) + ": " + log_tail(job.log, 3);
  return false;
}

// Runs every case that is not pending in a child process of its own, `jobs` at once (on every
// rank when an MPI launcher started this one: PointFarm), and fills in their entries of `out`;
// false when one failed or the farm could not run them.
bool run_cases_in_children(PointFarm& farm, const std::vector<jobs::ValidationCase>& cases,
                           int64_t steps, const jobs::SliceEdits& edits, int jobs,
                           nlohmann::ordered_json& out) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tpusim-validate-" + std::to_string(::getpid())))
          .string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::vector<FarmJob> farm_jobs;
  std::vector<size_t> case_of;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!out[i]["pending"].is_null()) continue;
    farm_jobs.push_back(case_job(cases[i], i, steps, edits, dir));
    case_of.push_back(i);
    log_line("validate: " + cases[i].name + " (log: " + farm_jobs.back().log + ")");
  }
  bool ok = true;
  FarmOptions options;
  options.slots = jobs;
  options.study_dir = dir;
  const absl::Status ran = farm.run(farm_jobs, options, [&](size_t k, const FarmOutcome& o) {
    nlohmann::ordered_json& j = out[case_of[k]];
    ok = take_child_report(farm_jobs[k], o, j) && ok;
    log_line(fmt::format("validate: {} ended, {:.1f} s", cases[case_of[k]].name, o.seconds));
  });
  if (!ran.ok()) {
    log_line("tpusim validate: " + std::string(ran.message()));
    return false;
  }
  return ok;
}

// The cases at once: --jobs, else one a core of this host.
int jobs_from(const po::variables_map& vm) {
  if (vm.count("jobs") > 0) return static_cast<int>(vm["jobs"].as<int64_t>());
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 256u));
}

std::string table_row(const nlohmann::ordered_json& j) {
  auto rate = [](const nlohmann::ordered_json& v) {
    return v.is_null() ? std::string("-") : fmt::format("{:.0f}/s", v.get<double>());
  };
  std::string predicted = "-", error = "-";
  if (!j["pending"].is_null()) {
    predicted = "pending: " + j["pending"].get<std::string>();
  } else if (j.contains("error")) {
    predicted = "failed: " + j["error"].get<std::string>();
  } else if (j.contains("predicted_step_seconds")) {
    predicted = fmt::format("{} ({:.1f} ms{})", rate(j["predicted_examples_per_second"]),
                            1e3 * j["predicted_step_seconds"].get<double>(),
                            j.value("steady_state", false) ? ", steady" : "");
    if (!j["step_time_error"].is_null())
      error = fmt::format("{:+.0f}%", 100 * j["step_time_error"].get<double>());
  }
  return fmt::format("{:<22} {:<8} {:>6}  {:>9}  {:<26} {}\n", j["name"].get<std::string>(),
                     j["slice"].get<std::string>(), j["global_batch"].get<int64_t>(),
                     rate(j["measured_examples_per_second"]), predicted, error);
}

// Rank 0 (or the one process): runs the cases and prints or writes their table.
// `farm` runs the cases, `jobs` at once; without one, the one case runs here.
int coordinate_validate(const po::variables_map& vm, const std::vector<jobs::ValidationCase>& cases,
                        const jobs::SliceEdits& edits, PointFarm* farm, int jobs) {
  const bool list = vm["list"].as<bool>();
  const int64_t steps = vm["steps"].as<int64_t>();
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : cases) out.push_back(case_json(c));
  bool ok = true;
  if (!list && farm != nullptr) {
    ok = run_cases_in_children(*farm, cases, steps, edits, jobs, out);
  } else if (!list) {  // one case runs here
    ok = run_case(cases.front(), steps, edits, out[0]);
  }
  if (vm.count("report") > 0) {
    const absl::Status written =
        write_report_file(vm["report"].as<std::string>(), json_text(out) + "\n");
    if (!written.ok()) return failure(std::string(written.message()));
  }
  if (vm["json"].as<bool>()) {
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << fmt::format("{:<22} {:<8} {:>6}  {:>9}  {:<26} {}\n", "case", "slice", "batch",
                             "measured", "predicted", "step time error");
    for (const auto& j : out) std::cout << table_row(j);
  }
  return ok ? kOk : kFailed;
}

}  // namespace

int run_validate(const std::vector<std::string>& args) {
  const po::options_description options = validate_options();
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kValidateUsage, &vm); rc >= 0) return rc;
  std::vector<jobs::ValidationCase> cases;
  if (Refused r = cases_from(vm, &cases)) return refuse(*r, kValidateUsage);
  jobs::SliceEdits edits;
  if (Refused r = slice_edits_from(vm, cases, &edits)) return refuse(*r, kValidateUsage);
  if (absl::Status s = check_output_destinations(vm); !s.ok())
    return failure(std::string(s.message()));
  // One case runs here; several, each in a process of its own (SystemC elaborates one slice per
  // process), from a farm that every rank of an MPI job serves.
  if (vm["list"].as<bool>() || cases.size() == 1)
    return coordinate_validate(vm, cases, edits, nullptr, 1);
  auto farm = PointFarm::open();
  if (!farm.ok()) return failure(std::string(farm.status().message()));
  const int jobs = jobs_from(vm);
  const std::string told = (*farm)->share(std::to_string(jobs));
  if (!(*farm)->coordinator()) {
    FarmOptions served;
    std::istringstream(told) >> served.slots;
    return (*farm)->finish((*farm)->serve(served));
  }
  return (*farm)->finish(coordinate_validate(vm, cases, edits, farm->get(), jobs));
}

}  // namespace tpusim::cli
