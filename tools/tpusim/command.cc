#include "tools/tpusim/command.h"

#include <iostream>

namespace tpusim::cli {

namespace po = boost::program_options;

int usage_error(const std::string& message, const std::string& usage) {
  std::cerr << "tpusim: " << message << "\n\n" << usage;
  return kUsage;
}

int failure(const std::string& message) {
  std::cerr << "tpusim: " << message << "\n";
  return kFailed;
}

int parse_args(const std::vector<std::string>& args, const po::options_description& options,
               const po::positional_options_description& positional, const std::string& usage,
               po::variables_map* vm) {
  po::options_description all = options;
  all.add_options()("help,h", "show this help and exit");
  std::ostringstream full_usage;
  full_usage << usage << "\n" << all;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), *vm);
    if (vm->count("help") > 0) {
      std::cout << full_usage.str();
      return kOk;
    }
    po::notify(*vm);
  } catch (const po::error& e) {
    return usage_error(e.what(), full_usage.str());
  }
  return -1;
}

void log_to_stderr(const std::string& text) { std::cerr << text << std::flush; }

}  // namespace tpusim::cli
