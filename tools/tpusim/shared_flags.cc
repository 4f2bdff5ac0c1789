#include "tools/tpusim/shared_flags.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

#include "common/strings.h"
#include "runtime/graph/optimizers.h"
#include "sim/timing/mxu_policy.h"

namespace tpusim::cli {

namespace po = boost::program_options;

namespace {

// `meaning`, with the command's own default and its reason when it has one.
template <typename T>
std::string help(const std::string& meaning, const std::optional<OtherDefault<T>>& other) {
  return other ? str_cat(meaning, " (", other->why, ")") : meaning;
}

// The flag's value, bound to `bound` when given, defaulting to `fallback` or the command's own;
// the default shown as fmt writes it (0.05, not Boost's 0.0500000007).
template <typename T>
po::typed_value<T>* value_of(T* bound, const T& fallback,
                             const std::optional<OtherDefault<T>>& other) {
  const T& value = other ? other->value : fallback;
  return po::value<T>(bound)->default_value(value, str_cat(value));
}

}  // namespace

void add_config_flag(po::options_description& options, std::string* bound) {
  options.add_options()("config", po::value<std::string>(bound)->default_value("v3-8"),
                        "the slice the tpusim backend simulates: a config file or a built-in name "
                        "(`tpusim config list`)");
}

void add_json_flag(po::options_description& options) {
  options.add_options()("json", po::bool_switch(), "print JSON instead of text");
}

void add_report_flag(po::options_description& options) {
  options.add_options()("report", po::value<std::string>(), "also write the JSON report to FILE");
}

namespace {

// Creates `dir` (and its parents) for what `flag` writes there, or says why it cannot.
absl::Status make_output_folder(const char* flag, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) return absl::OkStatus();
  return absl::FailedPreconditionError(
      str_cat(flag, " ", dir, ": cannot create it: ", ec.message()));
}

}  // namespace

absl::Status check_output_destinations(const po::variables_map& vm) {
  if (vm.count("report") > 0) {
    const std::string path = vm["report"].as<std::string>();
    if (path.empty()) return absl::InvalidArgumentError("--report: an empty path");
    // Its folder is made as the run makes its model_dir (a report inside that folder is usual).
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) {
      return absl::FailedPreconditionError(str_cat("--report ", path, ": cannot create its folder ",
                                                   parent.string(), ": ", ec.message()));
    }
    const bool existed = ::access(path.c_str(), F_OK) == 0;
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          str_cat("--report ", path, ": cannot write it: ", std::strerror(errno)));
    }
    ::close(fd);
    if (!existed) ::unlink(path.c_str());
  }
  if (vm.count("export-dir") > 0) {
    const std::string dir = vm["export-dir"].as<std::string>();
    if (dir.empty()) return absl::InvalidArgumentError("--export-dir: an empty path");
    if (absl::Status s = make_output_folder("--export-dir", dir); !s.ok()) return s;
  }
  // The folders a run writes inside its model_dir: the profile's (--profile) and the evaluation's
  // summaries (--eval-steps), tried as the run would make them.
  if (vm.count("model-dir") == 0) return absl::OkStatus();
  const std::filesystem::path model_dir = vm["model-dir"].as<std::string>();
  // A model_dir that cannot be made at all is named as such when the run makes it.
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    std::filesystem::create_directories(model_dir, ec);
    if (ec) return absl::OkStatus();
  }
  if (vm.count("profile") > 0 && vm["profile"].as<bool>()) {
    const std::string dir = (model_dir / "plugins" / "profile").string();
    if (absl::Status s = make_output_folder("--profile", dir); !s.ok()) return s;
  }
  if (vm.count("eval-steps") > 0 && vm["eval-steps"].as<int64_t>() > 0) {
    const std::string dir = (model_dir / "eval").string();
    if (absl::Status s = make_output_folder("--eval-steps", dir); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status write_report_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!(out << text) || !out.flush()) {
    return absl::FailedPreconditionError(str_cat("cannot write the report to ", path));
  }
  return absl::OkStatus();
}

void add_batch_size_flag(po::options_description& options, int64_t* bound,
                         const std::optional<OtherDefault<int64_t>>& other) {
  options.add_options()("batch-size", value_of<int64_t>(bound, 1024, other),
                        help("the global batch size, over every replica", other).c_str());
}

void add_model_flag(po::options_description& options, std::string* bound,
                    const std::optional<OtherDefault<std::string>>& other) {
  const std::string meaning = "a zoo model (`tpusim compile --help` lists them)";
  if (other && other->value.empty()) {
    options.add_options()("model", po::value<std::string>(bound), help(meaning, other).c_str());
    return;
  }
  options.add_options()("model", value_of<std::string>(bound, "mnist_cnn", other),
                        help(meaning, other).c_str());
}

void add_optimizer_flags(po::options_description& options, float* learning_rate,
                         const std::optional<OtherDefault<std::string>>& other_optimizer,
                         const std::optional<OtherDefault<float>>& other_rate) {
  options.add_options()("optimizer", value_of<std::string>(nullptr, "adam", other_optimizer),
                        help(runtime::kOptimizers.list(" | ", " | "), other_optimizer).c_str())(
      "learning-rate", value_of<float>(learning_rate, 2e-3f, other_rate),
      help("the optimizer's rate", other_rate).c_str());
}

void add_eval_steps_flag(po::options_description& options, int64_t* bound) {
  options.add_options()(
      "eval-steps", po::value<int64_t>(bound)->default_value(0),
      "test batches to evaluate (0: as many whole batches as the 10,000 test images fill; BERT "
      "models: none unless given, then batches of the records' masked-LM and next-sentence "
      "metrics)");
}

void add_mxu_policy_flag(po::options_description& options) {
  options.add_options()(
      "mxu-policy", po::value<std::string>()->default_value("tpu"),
      str_cat("the MXU timing policy: ", sim::kMxuPolicies.list(" | ", " | ")).c_str());
}

void add_timing_only_flag(po::options_description& options) {
  options.add_options()("timing-only", po::bool_switch(),
                        "simulate time only: compute no values (no errors, losses or accuracy)");
}

void add_dump_flag(po::options_description& options) {
  options.add_options()("dump", po::bool_switch(), "print the ISA program (and run nothing)");
}

}  // namespace tpusim::cli
