// tpusim layers: SCALE-Sim topologies on one MXU of one core, timing-only.
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "configs/loader.h"
#include "runtime/lowering/weight_stationary_layers.h"
#include "runtime/workloads/scalesim_topology.h"
#include "sim/system.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {

namespace po = boost::program_options;

namespace {

po::options_description layers_options() {
  po::options_description options("options");
  add_config_flag(options);
  options.add_options()("topology", po::value<std::string>()->required(),
                        "SCALE-Sim topology CSV (conv or GEMM format)")(
      "format", po::value<std::string>()->default_value("auto"), "auto | conv | gemm");
  add_mxu_policy_flag(options);
  add_json_flag(options);
  return options;
}

constexpr char kLayersUsage[] =
    "usage: tpusim layers --topology FILE.csv [--config SLICE] [--mxu-policy tpu|scalesim_ws] "
    "[--json]\n\n"
    "Maps every layer of a SCALE-Sim topology onto one MXU of one core the way SCALE-Sim v2 "
    "does\n"
    "(weight-stationary folds of R x C) and simulates it timing-only. `cycles` follows "
    "SCALE-Sim's\n"
    "\"Total Cycles\": the zero-based cycle of the last output, elapsed cycles - 1; utilisation "
    "is\n"
    "MACs / (cycles x R x C). With --mxu-policy scalesim_ws on a 128x128 array the cycles equal\n"
    "SCALE-Sim v2's.\n";

// The topology's layers and the slice they run on.
struct LayersJob {
  sim::MxuPolicy policy = sim::MxuPolicy::kTpu;
  std::shared_ptr<const config::SliceSpec> slice;
  std::vector<runtime::TopologyLayer> layers;
};

Refused layers_job_from(const po::variables_map& vm, LayersJob* job) {
  auto policy = parse_mxu_policy(vm["mxu-policy"].as<std::string>());
  if (!policy.ok()) return usage_problem(policy.status());
  job->policy = *policy;
  const auto format = runtime::kTopologyFormats.parse(vm["format"].as<std::string>());
  if (!format) return usage_problem("--format must be auto, conv or gemm");
  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure_of(slice.status());
  job->slice = *slice;
  auto layers = runtime::read_scalesim_topology(vm["topology"].as<std::string>(), *format);
  if (!layers.ok()) return failure_of(layers.status());
  job->layers = *std::move(layers);
  return std::nullopt;
}

// Each layer simulated in turn on core 0: the report --json prints.
absl::StatusOr<nlohmann::ordered_json> simulate_layers(const LayersJob& job, sim::System& system) {
  const auto& core = job.slice->chip.core;
  const double array = static_cast<double>(core.mxu_rows) * core.mxu_cols;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  uint64_t total = 0;
  double total_macs = 0;
  for (const auto& layer : job.layers) {
    auto program = runtime::lower_weight_stationary_layer(*job.slice, 0, layer);
    if (!program.ok()) return program.status();
    auto run = system.run(program->program);
    if (!run.ok()) return run.status();
    const uint64_t cycles = run->cycles() - 1;
    total += cycles;
    total_macs += static_cast<double>(layer.macs());
    rows.push_back({{"name", layer.name},
                    {"t", layer.t},
                    {"k", layer.k},
                    {"n", layer.n},
                    {"folds", program->folds},
                    {"cycles", cycles},
                    {"elapsed_cycles", run->cycles()},
                    {"utilization",
                     static_cast<double>(layer.macs()) / (static_cast<double>(cycles) * array)}});
  }
  return nlohmann::ordered_json{{"config", job.slice->name},
                                {"mxu_policy", sim::kMxuPolicies.name(job.policy)},
                                {"array", {core.mxu_rows, core.mxu_cols}},
                                {"layers", rows},
                                {"total_cycles", total},
                                {"utilization", total_macs / (static_cast<double>(total) * array)}};
}

void print_layers(const LayersJob& job, const nlohmann::ordered_json& out) {
  const auto& core = job.slice->chip.core;
  std::cout << std::left << std::setw(28) << "layer" << std::right << std::setw(8) << "T"
            << std::setw(7) << "K" << std::setw(7) << "N" << std::setw(7) << "folds"
            << std::setw(12) << "cycles" << std::setw(9) << "util\n";
  for (const auto& r : out["layers"]) {
    std::cout << std::left << std::setw(28) << r["name"].get<std::string>() << std::right
              << std::setw(8) << r["t"].get<uint64_t>() << std::setw(7) << r["k"].get<uint64_t>()
              << std::setw(7) << r["n"].get<uint64_t>() << std::setw(7)
              << r["folds"].get<uint64_t>() << std::setw(12) << r["cycles"].get<uint64_t>()
              << std::setw(7) << std::fixed << std::setprecision(1)
              << 100 * r["utilization"].get<double>() << "%\n";
  }
  std::cout << "total " << out["total_cycles"].get<uint64_t>() << " cycles ("
            << sim::kMxuPolicies.name(job.policy) << ", " << core.mxu_rows << "x" << core.mxu_cols
            << "), utilisation " << std::setprecision(1) << 100 * out["utilization"].get<double>()
            << "%\n";
}

}  // namespace

int run_layers(const std::vector<std::string>& args) {
  const po::options_description options = layers_options();
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kLayersUsage, &vm); rc >= 0) return rc;
  LayersJob job;
  if (Refused r = layers_job_from(vm, &job)) return refuse(*r, kLayersUsage);
  auto system = sim::System::create(job.slice, {job.policy, /*timing_only=*/true, nullptr});
  if (!system.ok()) return failure(std::string(system.status().message()));
  auto out = simulate_layers(job, **system);
  if (!out.ok()) return failure(std::string(out.status().message()));
  if (vm["json"].as<bool>()) {
    std::cout << json_text(*out) << "\n";
    return kOk;
  }
  print_layers(job, *out);
  return kOk;
}

}  // namespace tpusim::cli
