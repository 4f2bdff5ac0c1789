// tpusim compare-profile: a measured XProf profile (a real TPU job's) against a simulated one
// (`tpusim train --profile`), op by op: ops matched by name and category, each one's time a step
// on one device on both sides and the ratio, by category and over the step
// (traces/profile_compare.h).
#include <iostream>

#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/shared_flags.h"
#include "traces/profile_compare.h"
#include "traces/xspace_ops.h"

namespace tpusim::cli {

int run_compare_profile(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description options("options");
  options.add_options()("measured", po::value<std::string>(),
                        "the measured profile (REAL.xplane.pb)")(
      "simulated", po::value<std::string>(), "the simulated profile (SIMULATED.xplane.pb)")(
      "top", po::value<int>()->default_value(15),
      "the costliest ops in both listed (0: every one)");
  add_json_flag(options);
  po::positional_options_description positional;
  positional.add("measured", 1).add("simulated", 1);
  const std::string usage =
      "usage: tpusim compare-profile REAL.xplane.pb SIMULATED.xplane.pb [--top N] [--json]\n\n"
      "Where the simulator is wrong for a model, op by op: a profile of the real job (XProf's\n"
      "XSpace, as a Cloud TPU job or JAX's profiler writes it) beside tpusim's of the same\n"
      "model (`tpusim train --profile`). Ops are matched by name and XLA category; each side's\n"
      "time is an op's self time a step on one device (averaged over the profile's steps and\n"
      "devices), and ratios are simulated over measured. Prints the step times, every\n"
      "category, the costliest ops in both and what only one side ran.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, positional, usage, &vm); rc >= 0) return rc;
  if (vm.count("measured") == 0 || vm.count("simulated") == 0) {
    return usage_error("which profiles? (REAL and SIMULATED are both required)", usage);
  }
  const int top = vm["top"].as<int>();  // parse_args refuses a negative count
  auto measured = traces::read_op_profile(vm["measured"].as<std::string>());
  if (!measured.ok()) return failure(std::string(measured.status().message()));
  auto simulated = traces::read_op_profile(vm["simulated"].as<std::string>());
  if (!simulated.ok()) return failure(std::string(simulated.status().message()));
  const traces::ProfileComparison comparison =
      traces::compare_profiles(std::move(*measured), std::move(*simulated));
  if (vm["json"].as<bool>()) {
    std::cout << json_text(comparison.to_json()) << "\n";
  } else {
    std::cout << comparison.to_text(static_cast<size_t>(top));
  }
  return kOk;
}

}  // namespace tpusim::cli
