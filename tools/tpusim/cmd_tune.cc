// tpusim tune: runs the training job once per iterations_per_loop value, each in a process of
// its own (across the ranks of an MPI job when mpirun or srun started it), and recommends the
// smallest value whose host overhead (the device idling through the host's round trip between
// device loops) is under 3% of the step time, the profiler's threshold. It says too when the
// input pipeline, which no iterations_per_loop fixes, bounds the step. Runs are timing-only
// unless --numerics: the host pipeline still runs for real.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/strings.h"
#include "tools/studies/point_farm.h"
#include "tools/studies/subprocess.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "traces/analyzer.h"

namespace tpusim::cli {
using studies::FarmJob;
using studies::FarmOptions;
using studies::FarmOutcome;
using studies::log_tail;
using studies::PointFarm;
namespace {

const char* const kTuneUsage =
    "usage: tpusim tune --iterations-per-loop 1,10,50,100,1000 [--steps N] [--numerics]\n"
    "                   [--json] [--rank-timeout S] [train options: --model, --config, ...]\n\n"
    "Runs `tpusim train` at each iterations_per_loop value (each in its own process, timing-only\n"
    "unless --numerics) for N steps (default: two device loops of that value), and recommends the\n"
    "smallest value whose host overhead is under 3% of the step time. When the device waits for\n"
    "its input (the profiler's input-bound classes) it says so and names the host pipeline's\n"
    "slowest stage: iterations_per_loop does not shorten that wait. Prints a table, or with\n"
    "--json: rows (iterations_per_loop, host_overhead_fraction, sim_seconds_per_step,\n"
    "infeed_wait_fraction, input_classification, slowest_host_stage, steps),\n"
    "recommended_iterations_per_loop and input_bound. Under MPI (`mpirun -np R tpusim tune ...`)\n"
    "the values run on the ranks, one at a time each; a rank silent for S seconds (default 60)\n"
    "is lost.\n";

absl::StatusOr<std::vector<uint32_t>> parse_values(const std::string& list) {
  std::vector<uint32_t> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != 0 || v < 1 || v > 1000000) {
      return absl::InvalidArgumentError(
          str_cat("--iterations-per-loop: '", item, "' is not a count from 1 to 1000000"));
    }
    out.push_back(static_cast<uint32_t>(v));
  }
  if (out.empty()) return absl::InvalidArgumentError("--iterations-per-loop: no values");
  return out;
}

// tune's flags; the rest go to train.
struct TuneFlags {
  bool help = false;  // -h or --help came before any problem
  std::string list;   // --iterations-per-loop
  int64_t steps = 0;  // 0: two device loops of each value
  bool json = false, numerics = false;
  double rank_timeout_seconds = 60;
  std::vector<std::string> train_args;
};

Refused parse_tune_args(const std::vector<std::string>& args, TuneFlags* f) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      f->help = true;
      return std::nullopt;
    } else if (a == "--json") {
      f->json = true;
    } else if (a == "--numerics") {
      f->numerics = true;
    } else if (a == "--iterations-per-loop") {
      if (!value(&f->list)) return usage_problem("--iterations-per-loop needs a list");
    } else if (a == "--steps") {
      std::string s;
      if (!value(&s)) return usage_problem("--steps needs a count >= 1");
      auto steps = parse_count("--steps", s, 1, INT64_MAX);
      if (!steps.ok()) return usage_problem(steps.status());
      f->steps = *steps;
    } else if (a == "--rank-timeout") {
      std::string s;
      if (!value(&s)) return usage_problem("--rank-timeout needs seconds from 5 to 86400");
      auto seconds = parse_rank_timeout(s);
      if (!seconds.ok()) return usage_problem(seconds.status());
      f->rank_timeout_seconds = *seconds;
    } else if (a == "--train-steps" || a == "--model-dir" || a == "--report" ||
               a == "--timing-only" || a == "--trace") {
      return usage_problem(a + " is chosen by tune for each run");
    } else {
      f->train_args.push_back(a);
    }
  }
  return std::nullopt;
}

// Steps of the run at `v`: --steps, or two device loops.
int64_t tune_steps(const TuneFlags& f, uint32_t v) {
  return f.steps > 0 ? f.steps : 2 * int64_t{v};
}

// The figures of one run: the report's analysis.
Refused read_row(const std::string& report, uint32_t v, int64_t n, nlohmann::ordered_json* row,
                 double* overhead) {
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("analysis")) {
    return failure_of(
        str_cat("the run with iterations_per_loop ", v, " wrote no analysis to ", report));
  }
  const auto& a = j["analysis"];
  const double step = a["step_seconds"].get<double>();
  const double idle = a["step_breakdown"]["idle"].get<double>();
  *overhead = step > 0 ? idle / step : 0;
  *row = {{"iterations_per_loop", v},
          {"host_overhead_fraction", *overhead},
          {"sim_seconds_per_step", j["sim_seconds_per_step"].get<double>()},
          {"infeed_wait_fraction", a["input_fraction"].get<double>()},
          {"input_classification", a.value("classification", "")},
          {"slowest_host_stage", a.contains("slowest_host_stage")
                                     ? a["slowest_host_stage"].value("name", "")
                                     : std::string()},
          {"steps", n}};
  return std::nullopt;
}

// The job of `tpusim train` at iterations_per_loop `v`, its files under `dir`.
FarmJob tune_job(const TuneFlags& f, const std::filesystem::path& dir, uint32_t v) {
  const std::string tag = "ipl" + std::to_string(v);
  FarmJob job;
  job.id = tag;
  job.report = (dir / (tag + ".json")).string();
  job.log = (dir / (tag + ".log")).string();
  job.run_dir = (dir / tag).string();
  const int64_t n = tune_steps(f, v);
  job.args = {"train"};
  job.args.insert(job.args.end(), f.train_args.begin(), f.train_args.end());
  job.args.insert(job.args.end(), {"--iterations-per-loop", std::to_string(v), "--train-steps",
                                   std::to_string(n), "--model-dir", job.run_dir, "--report",
                                   job.report, "--log-every", std::to_string(n)});
  if (!f.numerics) job.args.push_back("--timing-only");
  return job;
}

// Runs every value's job (on the farm's ranks); their rows in the order of the values, and the
// smallest value whose host overhead is under the profiler's threshold (-1: none).
Refused tune_runs(const TuneFlags& f, const std::vector<uint32_t>& values, PointFarm& farm,
                  const std::filesystem::path& dir, nlohmann::ordered_json* rows,
                  int64_t* recommended) {
  std::vector<FarmJob> jobs;
  for (uint32_t v : values) jobs.push_back(tune_job(f, dir, v));
  std::vector<FarmOutcome> outcomes(jobs.size());
  FarmOptions options;
  options.rank_timeout_seconds = f.rank_timeout_seconds;
  options.study_dir = dir.string();
  const absl::Status ran = farm.run(jobs, options, [&](size_t j, const FarmOutcome& o) {
    outcomes[j] = o;
    if (!f.json)
      std::cerr << "tune: iterations_per_loop " << values[j] << ", " << tune_steps(f, values[j])
                << " steps: " << (o.exit_code == 0 ? "done" : "FAILED") << "\n";
  });
  if (!ran.ok()) return failure_of(ran);
  *rows = nlohmann::ordered_json::array();
  *recommended = -1;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (outcomes[j].exit_code != 0) {
      return failure_of(str_cat("the run with iterations_per_loop ", values[j], " failed (",
                                outcomes[j].failure.empty()
                                    ? str_cat("exit ", outcomes[j].exit_code)
                                    : outcomes[j].failure,
                                "); its log, ", jobs[j].log, ", ends:\n", log_tail(jobs[j].log)));
    }
    nlohmann::ordered_json row;
    double overhead = 0;
    if (Refused r = read_row(jobs[j].report, values[j], tune_steps(f, values[j]), &row, &overhead))
      return r;
    rows->push_back(std::move(row));
    if (*recommended < 0 && overhead < traces::kHostOverheadNote) *recommended = values[j];
  }
  return std::nullopt;
}

// The row the advice is about: the recommended value's, or the largest value's when none is.
const nlohmann::ordered_json& advised_row(const nlohmann::ordered_json& rows, int64_t recommended) {
  for (const auto& r : rows) {
    if (r["iterations_per_loop"].get<int64_t>() == recommended) return r;
  }
  return rows.back();
}

// "highly_input_bound" -> "highly input bound".
std::string spaced(std::string name) {
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

bool input_bound(const nlohmann::ordered_json& row) {
  const std::string c = row["input_classification"].get<std::string>();
  return !c.empty() && c != "not_input_bound";
}

// What bounds the step beside the host overhead: the input pipeline, when the device waits for
// it (a wait no iterations_per_loop shortens).
std::string input_advice(const nlohmann::ordered_json& row) {
  const std::string stage = row["slowest_host_stage"].get<std::string>();
  return fmt::format(
      "the input pipeline bounds the step: at iterations_per_loop {} the device waits for its "
      "input {:.1f}% of the step ({}{}). iterations_per_loop does not shorten that wait; a faster "
      "input pipeline does (more threads on its slowest stage, docs/profiling.md)\n",
      row["iterations_per_loop"].get<int64_t>(), row["infeed_wait_fraction"].get<double>() * 100,
      spaced(row["input_classification"].get<std::string>()),
      stage.empty() ? "" : str_cat("; the host pipeline's slowest stage is '", stage, "'"));
}

void print_tune(const nlohmann::ordered_json& rows, int64_t recommended, bool json) {
  const nlohmann::ordered_json& advised = advised_row(rows, recommended);
  if (json) {
    nlohmann::ordered_json out = {{"rows", rows}};
    out["recommended_iterations_per_loop"] =
        recommended > 0 ? nlohmann::ordered_json(recommended) : nlohmann::ordered_json(nullptr);
    out["input_bound"] = input_bound(advised);
    std::cout << json_text(out) << "\n";
    return;
  }
  std::cout << fmt::format("{:>20} {:>14} {:>14} {:>12}\n", "iterations_per_loop", "ms/step (sim)",
                           "host overhead", "infeed wait");
  for (const auto& r : rows) {
    // Two decimals: 2.96% and 3.04% fall either side of the 3% threshold.
    std::cout << fmt::format("{:>20} {:>14.4f} {:>13.2f}% {:>11.1f}%\n",
                             r["iterations_per_loop"].get<uint32_t>(),
                             r["sim_seconds_per_step"].get<double>() * 1e3,
                             r["host_overhead_fraction"].get<double>() * 100,
                             r["infeed_wait_fraction"].get<double>() * 100);
  }
  if (recommended > 0) {
    std::cout << "recommended iterations_per_loop: " << recommended
              << " (the smallest whose host overhead is under 3% of the step)\n";
  } else {
    std::cout << "no value brings the host overhead under 3% of the step; try larger ones\n";
  }
  if (input_bound(advised)) std::cout << input_advice(advised);
}

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  TuneFlags flags;
  if (Refused r = parse_tune_args(args, &flags)) return refuse(*r, kTuneUsage);
  if (flags.help) {
    std::cout << kTuneUsage;
    return kOk;
  }
  if (flags.list.empty()) return usage_error("--iterations-per-loop is required", kTuneUsage);
  auto values = parse_values(flags.list);
  if (!values.ok()) return usage_error(std::string(values.status().message()), kTuneUsage);
  auto farm = PointFarm::open();
  if (!farm.ok()) return failure(std::string(farm.status().message()));
  FarmOptions options;
  options.rank_timeout_seconds = flags.rank_timeout_seconds;
  if (!(*farm)->coordinator()) return (*farm)->finish((*farm)->serve(options));

  // Named by rank 0's host and pid: the same path on every rank.
  const auto dir = std::filesystem::temp_directory_path() / ("tpusim-tune-" + (*farm)->nonce());
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json rows;
  int64_t recommended = -1;
  if (Refused r = tune_runs(flags, *values, **farm, dir, &rows, &recommended)) {
    // The failed run's log stays in `dir` for the message that names it.
    return (*farm)->finish(refuse(*r, kTuneUsage));
  }
  std::filesystem::remove_all(dir);
  print_tune(rows, recommended, flags.json);
  return (*farm)->finish(kOk);
}

}  // namespace tpusim::cli
