// tpusim backends [--json]: the backends this binary has and whether they can run here.
#include <iostream>

#include <nlohmann/json.hpp>

#include "runtime/backend_registry.h"
#include "runtime/gpu/cuda_probe.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"

namespace tpusim::cli {

namespace po = boost::program_options;

int run_backends(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("json", po::bool_switch(), "print JSON instead of text");
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim backends [--json]\n\n"
      "Lists the backends built into tpusim (name, built, available, reason) and what the CUDA\n"
      "runtime sees on this machine.\n";
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;

  const auto backends = runtime::list_backends();
  const auto cuda = runtime::gpu::probe_cuda();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& b : backends) {
    rows.push_back({{"name", b.name},
                    {"description", b.description},
                    {"built", b.built},
                    {"available", b.available},
                    {"reason", b.reason}});
  }
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const auto& d : cuda.devices) {
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"compute_capability", std::to_string(d.compute_capability_major) + "." +
                                                  std::to_string(d.compute_capability_minor)},
                       {"memory_bytes", d.memory_bytes}});
  }
  if (vm["json"].as<bool>()) {
    std::cout << nlohmann::ordered_json{{"backends", rows},
                                        {"cuda",
                                         {{"built", cuda.built},
                                          {"runtime_version", cuda.runtime_version},
                                          {"driver_version", cuda.driver_version},
                                          {"devices", devices},
                                          {"reason", cuda.reason}}}}
                     .dump(2)
              << "\n";
    return kOk;
  }
  for (const auto& b : backends) {
    std::cout << b.name << "\t" << (b.built ? "built" : "not built") << "\t"
              << (b.available ? "available" : "unavailable: " + b.reason) << "\n";
  }
  std::cout << "cuda\t"
            << (cuda.built ? "built (runtime " + std::to_string(cuda.runtime_version) + ")"
                           : "not built")
            << "\t" << cuda.devices.size() << " device(s)"
            << (cuda.reason.empty() ? "" : ": " + cuda.reason) << "\n";
  return kOk;
}

}  // namespace tpusim::cli
