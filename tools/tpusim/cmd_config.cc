// tpusim config show FILE [--json] | tpusim config list [--json]
#include <iostream>

#include "configs/describe.h"
#include "configs/embedded_files.h"
#include "configs/loader.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;

const char kConfigUsage[] =
    "usage: tpusim config show FILE [--json]   validate a config, print it and its derived "
    "figures\n"
    "       tpusim config list [--json]        list the configs built into tpusim\n\n"
    "FILE is a path, or the name of a built-in config (v3-8, tpu_v4, ...). A slice file shows\n"
    "the whole slice with its chip and host; a chip or host file shows that part alone.\n";

void print_json(const nlohmann::ordered_json& j) { std::cout << json_text(j) << "\n"; }

int show(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("file", po::value<std::string>()->required(), "config file or name");
  add_json_flag(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  const std::string usage = "usage: tpusim config show FILE [--json]\n";
  if (int rc = parse_args(args, options, positional, usage, &vm); rc >= 0) return rc;
  const bool json = vm["json"].as<bool>();

  auto text = config::read_config(vm["file"].as<std::string>());
  if (!text.ok()) return failure(std::string(text.status().message()));
  switch (config::detect_kind(*text)) {
    case config::ConfigKind::kChip: {
      auto chip = config::parse_chip(*text);
      if (!chip.ok()) return failure(std::string(chip.status().message()));
      json ? print_json(config::to_json(**chip)) : void(std::cout << config::describe(**chip));
      return kOk;
    }
    case config::ConfigKind::kHost: {
      auto host = config::parse_host(*text);
      if (!host.ok()) return failure(std::string(host.status().message()));
      json ? print_json(config::to_json(**host)) : void(std::cout << config::describe(**host));
      return kOk;
    }
    case config::ConfigKind::kSlice:
      break;
  }
  auto slice = config::parse_slice(*text);
  if (!slice.ok()) return failure(std::string(slice.status().message()));
  json ? print_json(config::to_json(**slice)) : void(std::cout << config::describe(**slice));
  return kOk;
}

int list(const std::vector<std::string>& args) {
  po::options_description options("options");
  add_json_flag(options);
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, "usage: tpusim config list [--json]\n", &vm);
      rc >= 0) {
    return rc;
  }
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::string& name : config::embedded_names()) {
    auto text = config::read_config(name);
    const char* kind = "slice";
    if (text.ok() && config::detect_kind(*text) == config::ConfigKind::kChip) kind = "chip";
    if (text.ok() && config::detect_kind(*text) == config::ConfigKind::kHost) kind = "host";
    rows.push_back({{"name", name}, {"kind", kind}});
  }
  if (vm["json"].as<bool>()) {
    print_json(nlohmann::ordered_json{{"configs", rows}});
  } else {
    for (const auto& row : rows) {
      std::cout << row["kind"].get<std::string>() << "\t" << row["name"].get<std::string>() << "\n";
    }
  }
  return kOk;
}

}  // namespace

int run_config(const std::vector<std::string>& args) {
  if (args.empty()) return usage_error("config: missing action (show or list)", kConfigUsage);
  const std::string& action = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (action == "show") return show(rest);
  if (action == "list") return list(rest);
  if (action == "--help" || action == "-h") {
    std::cout << kConfigUsage;
    return kOk;
  }
  return usage_error("config: unknown action '" + action + "'", kConfigUsage);
}

}  // namespace tpusim::cli
