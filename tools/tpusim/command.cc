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

namespace {

// The message refusing a negative value given to an integer option, or "". Every integer flag
// of tpusim is a count, a size or an index (none gives a negative value a meaning), and Boost
// reads "-1" for an unsigned one as 2^32 - 1 (or 2^64 - 1), for a signed one as -1, which
// commands then took as 0 ("--eval-steps -1").
std::string negative_count(const po::parsed_options& parsed,
                           const po::options_description& options) {
  for (const po::option& o : parsed.options) {
    const po::option_description* d = options.find_nothrow(o.string_key, false);
    if (d == nullptr) continue;
    const po::value_semantic* semantic = d->semantic().get();
    const bool integer = dynamic_cast<const po::typed_value<uint32_t>*>(semantic) != nullptr ||
                         dynamic_cast<const po::typed_value<uint64_t>*>(semantic) != nullptr ||
                         dynamic_cast<const po::typed_value<int>*>(semantic) != nullptr ||
                         dynamic_cast<const po::typed_value<int64_t>*>(semantic) != nullptr;
    if (!integer) continue;
    for (const std::string& v : o.value) {
      const size_t first = v.find_first_not_of(" \t");
      if (first != std::string::npos && v[first] == '-')
        return "--" + o.string_key + " takes a number >= 0 (got " + v + ")";
    }
  }
  return "";
}

}  // namespace

int parse_args(const std::vector<std::string>& args, const po::options_description& options,
               const po::positional_options_description& positional, const std::string& usage,
               po::variables_map* vm) {
  po::options_description all = options;
  all.add_options()("help,h", "show this help and exit");
  std::ostringstream full_usage;
  full_usage << usage << "\n" << all;
  try {
    const po::parsed_options parsed =
        po::command_line_parser(args).options(all).positional(positional).run();
    if (std::string negative = negative_count(parsed, all); !negative.empty())
      return usage_error(negative, full_usage.str());
    po::store(parsed, *vm);
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
