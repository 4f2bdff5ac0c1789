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

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  std::string list;
  int64_t steps = 0;
  bool json = false, numerics = false;
  std::vector<std::string> train_args;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kTuneUsage;
      return kOk;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--numerics") {
      numerics = true;
    } else if (a == "--iterations-per-loop") {
      if (!value(&list)) return usage_error("--iterations-per-loop needs a list", kTuneUsage);
    } else if (a == "--steps") {
      std::string s;
      if (!value(&s) || (steps = std::atoll(s.c_str())) < 1)
        return usage_error("--steps needs a count >= 1", kTuneUsage);
    } else if (a == "--train-steps" || a == "--model-dir" || a == "--report" ||
               a == "--timing-only" || a == "--trace") {
      return usage_error(a + " is chosen by tune for each run", kTuneUsage);
    } else {
      train_args.push_back(a);
    }
  }
  if (list.empty()) return usage_error("--iterations-per-loop is required", kTuneUsage);
  auto values = parse_values(list);
  if (!values.ok()) return usage_error(std::string(values.status().message()), kTuneUsage);

  const auto dir =
      std::filesystem::temp_directory_path() / ("tpusim-tune-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  int64_t recommended = -1;
  for (uint32_t v : *values) {
    const std::string tag = "ipl" + std::to_string(v);
    const std::string report = (dir / (tag + ".json")).string();
    const std::string log = (dir / (tag + ".log")).string();
    std::vector<std::string> run = {"train"};
    run.insert(run.end(), train_args.begin(), train_args.end());
    const int64_t n = steps > 0 ? steps : 2 * int64_t{v};
    run.insert(run.end(), {"--iterations-per-loop", std::to_string(v), "--train-steps",
                           std::to_string(n), "--model-dir", (dir / tag).string(), "--report",
                           report, "--log-every", std::to_string(n)});
    if (!numerics) run.push_back("--timing-only");
    if (!json) std::cerr << "tune: iterations_per_loop " << v << ", " << n << " steps\n";
    auto rc = run_self(run, log);
    if (!rc.ok()) return failure(std::string(rc.status().message()));
    if (*rc != 0) {
      return failure(str_cat("the run with iterations_per_loop ", v, " failed (exit ", *rc,
                             "); its log, ", log, ", ends:\n", log_tail(log)));
    }
    std::ifstream in(report);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("analysis")) {
      return failure(
          str_cat("the run with iterations_per_loop ", v, " wrote no analysis to ", report));
    }
    const auto& a = j["analysis"];
    const double step = a["step_seconds"].get<double>();
    const double idle = a["step_breakdown"]["idle"].get<double>();
    const double overhead = step > 0 ? idle / step : 0;
    rows.push_back({{"iterations_per_loop", v},
                    {"host_overhead_fraction", overhead},
                    {"sim_seconds_per_step", j["sim_seconds_per_step"].get<double>()},
                    {"infeed_wait_fraction", a["input_fraction"].get<double>()},
                    {"steps", n}});
    if (recommended < 0 && overhead < traces::kHostOverheadNote) recommended = v;
  }
  std::filesystem::remove_all(dir);
  if (json) {
    nlohmann::ordered_json out = {{"rows", rows}};
    out["recommended_iterations_per_loop"] =
        recommended > 0 ? nlohmann::ordered_json(recommended) : nlohmann::ordered_json(nullptr);
    std::cout << out.dump(2) << "\n";
    return kOk;
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
  return kOk;
}

}  // namespace tpusim::cli
