// tpusim tune: runs the training job once per iterations_per_loop value, each in a process of
// its own, and recommends the smallest value whose host overhead (the device idling through the
// host's round trip between device loops) is under 3% of the step time, the profiler's
// threshold. Runs are timing-only unless --numerics: the host pipeline still runs for real.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/strings.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/subprocess.h"
#include "traces/analyzer.h"

namespace tpusim::cli {
namespace {

const char* const kTuneUsage =
    "usage: tpusim tune --iterations-per-loop 1,10,50,100,1000 [--steps N] [--numerics]\n"
    "                   [--json] [train options: --model, --config, --batch-size, ...]\n\n"
    "Runs `tpusim train` at each iterations_per_loop value (each in its own process, timing-only\n"
    "unless --numerics) for N steps (default: two device loops of that value), and recommends the\n"
    "smallest value whose host overhead is under 3% of the step time. Prints a table, or with\n"
    "--json: rows (iterations_per_loop, host_overhead_fraction, sim_seconds_per_step,\n"
    "infeed_wait_fraction) and recommended_iterations_per_loop.\n";

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
    } else if (a == "--train-steps" || a == "--model-dir" || a == "--report" ||
               a == "--timing-only" || a == "--trace") {
      return usage_problem(a + " is chosen by tune for each run");
    } else {
      f->train_args.push_back(a);
    }
  }
  return std::nullopt;
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
          {"steps", n}};
  return std::nullopt;
}

// `tpusim train` at iterations_per_loop `v` in a process of its own, its files under `dir`; its
// row, and its host overhead as a fraction of the step.
Refused tune_run(const TuneFlags& f, const std::filesystem::path& dir, uint32_t v,
                 nlohmann::ordered_json* row, double* overhead) {
  const std::string tag = "ipl" + std::to_string(v);
  const std::string report = (dir / (tag + ".json")).string();
  const std::string log = (dir / (tag + ".log")).string();
  std::vector<std::string> run = {"train"};
  run.insert(run.end(), f.train_args.begin(), f.train_args.end());
  const int64_t n = f.steps > 0 ? f.steps : 2 * int64_t{v};
  run.insert(run.end(), {"--iterations-per-loop", std::to_string(v), "--train-steps",
                         std::to_string(n), "--model-dir", (dir / tag).string(), "--report", report,
                         "--log-every", std::to_string(n)});
  if (!f.numerics) run.push_back("--timing-only");
  if (!f.json) std::cerr << "tune: iterations_per_loop " << v << ", " << n << " steps\n";
  auto rc = run_self(run, log);
  if (!rc.ok()) return failure_of(rc.status());
  if (*rc != 0) {
    return failure_of(str_cat("the run with iterations_per_loop ", v, " failed (exit ", *rc,
                              "); its log, ", log, ", ends:\n", log_tail(log)));
  }
  return read_row(report, v, n, row, overhead);
}

void print_tune(const nlohmann::ordered_json& rows, int64_t recommended, bool json) {
  if (json) {
    nlohmann::ordered_json out = {{"rows", rows}};
    out["recommended_iterations_per_loop"] =
        recommended > 0 ? nlohmann::ordered_json(recommended) : nlohmann::ordered_json(nullptr);
    std::cout << json_text(out) << "\n";
    return;
  }
  std::cout << fmt::format("{:>20} {:>14} {:>14} {:>12}\n", "iterations_per_loop", "ms/step (sim)",
                           "host overhead", "infeed wait");
  for (const auto& r : rows) {
    std::cout << fmt::format("{:>20} {:>14.4f} {:>13.1f}% {:>11.1f}%\n",
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

  const auto dir =
      std::filesystem::temp_directory_path() / ("tpusim-tune-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  int64_t recommended = -1;
  for (uint32_t v : *values) {
    nlohmann::ordered_json row;
    double overhead = 0;
    if (Refused r = tune_run(flags, dir, v, &row, &overhead)) return refuse(*r, kTuneUsage);
    rows.push_back(std::move(row));
    if (recommended < 0 && overhead < traces::kHostOverheadNote) recommended = v;
  }
  std::filesystem::remove_all(dir);
  print_tune(rows, recommended, flags.json);
  return kOk;
}

}  // namespace tpusim::cli
