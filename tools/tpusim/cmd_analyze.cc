// tpusim analyze: the step-time analysis of a trace file written by `tpusim train --trace`
// (traces/analyzer.h): the breakdown in the TPU profiler's categories, averaged over the steps
// and per step, the input-bound classification, the slowest host stage with what-if figures,
// and advice.
#include <iostream>
#include <optional>

#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/shared_flags.h"
#include "traces/analyzer.h"
#include "traces/trace_reader.h"
#include "traces/xspace_ops.h"
#include "traces/xspace_reader.h"

namespace tpusim::cli {

int run_analyze(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description options("options");
  options.add_options()("trace", po::value<std::string>(),
                        "the trace (.pftrace or .json) or XProf profile (.xplane.pb)")(
      "ops", po::value<int>()->default_value(10),
      "a profile's costliest ops listed (0: all of them)");
  add_json_flag(options);
  po::positional_options_description positional;
  positional.add("trace", 1);
  const std::string usage =
      "usage: tpusim analyze TRACE [--ops N] [--json]\n\n"
      "Where each training step's simulated time went (compute, input, output, all-reduce and\n"
      "waiting for peers, idle), the step time being the slowest core's; whether the run is\n"
      "input-bound, the slowest host pipeline stage and the step time with 2x and 4x its\n"
      "threads; advice. TRACE is a file `tpusim train --trace` wrote, or an XProf profile\n"
      "(FILE.xplane.pb: `train --profile` writes one; its host round trips are not in it). A\n"
      "profile's ops are listed too, costliest first: each one's self time a step on one\n"
      "device, as XProf's op profile ranks them. A profile of XLA on the CPU (JAX's profiler)\n"
      "is read too: its StepTraceAnnotation steps and the XLA ops run in them.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, positional, usage, &vm); rc >= 0) return rc;
  if (vm.count("trace") == 0) return usage_error("which trace? (TRACE is required)", usage);
  const std::string path = vm["trace"].as<std::string>();
  // A profile is parsed once, for its steps and its ops; a trace has no ops.
  std::optional<xprof::XSpace> profile;
  std::optional<traces::OpProfile> ops;
  if (traces::is_xspace_path(path)) {
    auto parsed = traces::parse_xspace_file(path);
    if (!parsed.ok()) return failure(std::string(parsed.status().message()));
    profile = std::move(*parsed);
  }
  auto trace = profile ? traces::analysis_events_of(*profile, path) : traces::read_trace(path);
  if (!trace.ok()) return failure(std::string(trace.status().message()));
  auto analysis = traces::analyze(**trace);
  if (!analysis.ok()) return failure(path + ": " + std::string(analysis.status().message()));
  const int top = vm["ops"].as<int>();  // parse_args refuses a negative count
  if (profile) {
    auto read = traces::op_profile_of(*profile, path);
    if (!read.ok()) return failure(std::string(read.status().message()));
    ops = std::move(*read);
  }
  if (vm["json"].as<bool>()) {
    nlohmann::ordered_json out = analysis->to_json();
    if (ops) out["ops"] = ops->to_json()["ops"];
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << analysis->to_text();
    if (ops) std::cout << ops->ops_text(static_cast<size_t>(top));
  }
  return kOk;
}

}  // namespace tpusim::cli
