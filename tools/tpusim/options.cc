#include "tools/tpusim/options.h"

#include <absl/strings/numbers.h>

#include "common/strings.h"
#include "estimator/jobs/onnx_job.h"
#include "estimator/jobs/saved_model_job.h"
#include "runtime/models/zoo.h"
#include "sim/timing/mxu_policy.h"

namespace tpusim::cli {

absl::StatusOr<uint64_t> parse_bytes(const std::string& flag, const std::string& text,
                                     uint64_t min) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return absl::InvalidArgumentError(str_cat(flag, " '", text, "' is not a size"));
  }
  const std::string unit = text.substr(used);
  double scale = 1;
  if (unit == "KiB")
    scale = 1024.0;
  else if (unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (!unit.empty() && unit != "B")
    return absl::InvalidArgumentError(
        str_cat(flag, " '", text, "': unknown unit '", unit, "' (B, KiB, MiB, GiB, KB, MB, GB)"));
  const double bytes = value * scale;
  if (!(bytes >= static_cast<double>(min)) || bytes > 64.0 * (1ull << 30)) {
    return absl::InvalidArgumentError(
        str_cat(flag, " ", text, " must be in [", min, " B, 64 GiB]"));
  }
  return static_cast<uint64_t>(bytes) / 4 * 4;
}

absl::StatusOr<int64_t> parse_count(const std::string& flag, const std::string& text, int64_t min,
                                    int64_t max) {
  int64_t value = 0;
  const bool digits = !text.empty() && text.find_first_not_of("-0123456789") == std::string::npos;
  if (!digits || !absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(
        str_cat(flag, " takes a whole number from ", min, " to ", max, " (got '", text, "')"));
  }
  return value;
}

absl::StatusOr<std::pair<int64_t, int64_t>> parse_step_range(const std::string& flag,
                                                             const std::string& text) {
  const size_t colon = text.find(':');
  const auto refused = [&] {
    return absl::InvalidArgumentError(
        str_cat(flag, " takes A:B, global steps with 0 <= A <= B (got '", text, "')"));
  };
  if (colon == std::string::npos) return refused();
  auto first = parse_count(flag, text.substr(0, colon), 0, INT64_MAX);
  auto last = parse_count(flag, text.substr(colon + 1), 0, INT64_MAX);
  if (!first.ok() || !last.ok() || *last < *first) return refused();
  return std::make_pair(*first, *last);
}

absl::StatusOr<double> parse_rank_timeout(const std::string& value) {
  auto seconds = parse_count("--rank-timeout", value, 5, 86400);
  if (!seconds.ok()) return seconds.status();
  return static_cast<double>(*seconds);
}

absl::StatusOr<isa::Precision> parse_precision(const std::string& name) {
  if (auto precision = kMatmulPrecisions.parse(name)) return *precision;
  return absl::InvalidArgumentError(
      str_cat("unknown precision '", name, "' (", kMatmulPrecisions.list(), ")"));
}

absl::StatusOr<sim::MxuPolicy> parse_mxu_policy(const std::string& name) {
  if (auto policy = sim::kMxuPolicies.parse(name)) return *policy;
  return absl::InvalidArgumentError(
      str_cat("unknown MXU policy '", name, "' (", sim::kMxuPolicies.list(", ", ", "), ")"));
}

std::string zoo_model_names(const std::string& separator) {
  std::vector<std::string> names;
  for (const auto& m : runtime::models::model_infos()) names.push_back(m.name);
  return str_join(names, separator);
}

void add_dtype_policy_option(boost::program_options::options_description& options) {
  options.add_options()(
      "dtype-policy", boost::program_options::value<std::string>()->default_value("float32"),
      "float32 | mixed_bfloat16: activations, their gradients and the MXU's operands in bf16, "
      "variables and the loss in f32 (TPU mixed precision, tf.tpu.bfloat16_scope)");
}

absl::StatusOr<runtime::models::DTypePolicy> dtype_policy_from(
    const boost::program_options::variables_map& vm) {
  auto policy = runtime::models::parse_dtype_policy(vm["dtype-policy"].as<std::string>());
  if (!policy.ok())
    return absl::InvalidArgumentError(str_cat("--dtype-policy: ", policy.status().message()));
  return policy;
}

void add_seq_length_option(boost::program_options::options_description& options) {
  options.add_options()("seq-length", boost::program_options::value<int64_t>()->default_value(128),
                        "BERT models: tokens per sequence, 8 to 512 (BERT pretrained at 128 "
                        "and 512; masked positions 20 and 76, else 15% of the tokens)");
}

void add_imported_model_options(boost::program_options::options_description& options) {
  namespace po = boost::program_options;
  options.add_options()("onnx", po::value<std::string>(),
                        "an ONNX model (opsets 11-17; Keras via tf2onnx, torch.onnx) in place of "
                        "--model: `tpusim import FILE` shows what it holds")(
      "onnx-input", po::value<std::string>()->default_value(""),
      "the ONNX input the images feed (default: the only one)")(
      "onnx-output", po::value<std::string>()->default_value(""),
      "the ONNX output holding the logits, or the probabilities of a final Softmax (default: the "
      "only one)")("saved-model", po::value<std::string>(),
                   "a saved model folder (train --export-dir, a C++ program's export_saved_model) "
                   "in place of --model: its predict graph and weights")(
      "saved-model-output", po::value<std::string>()->default_value(""),
      "the saved model's prediction to train on (default: the only one the loss takes)")(
      "loss", po::value<std::string>()->default_value("softmax_cross_entropy"),
      "--onnx, --saved-model: softmax_cross_entropy (class labels; the output is the logits or "
      "their softmax) | mean_squared_error (float labels of the output's shape)");
}

Refused imported_model_from(const boost::program_options::variables_map& vm,
                            std::optional<jobs::ImportedModel>* model) {
  const bool onnx = vm.count("onnx") > 0, saved = vm.count("saved-model") > 0;
  if (!onnx && !saved) return std::nullopt;
  if (onnx && saved) return usage_problem("--onnx and --saved-model each name a model: give one");
  if (vm.count("model") > 0 && !vm["model"].defaulted())
    return usage_problem(
        str_cat(onnx ? "--onnx" : "--saved-model", " and --model each name a model: give one"));
  auto loss = jobs::parse_loss(vm["loss"].as<std::string>());
  if (!loss.ok()) return usage_problem(str_cat("--loss: ", loss.status().message()));
  auto opened =
      onnx ? jobs::open_onnx_job(vm["onnx"].as<std::string>(), vm["onnx-input"].as<std::string>(),
                                 vm["onnx-output"].as<std::string>(), *loss)
           : jobs::open_saved_model_job(vm["saved-model"].as<std::string>(),
                                        vm["saved-model-output"].as<std::string>(), *loss);
  if (!opened.ok()) return failure_of(opened.status());
  *model = *std::move(opened);
  return std::nullopt;
}

bool names_imported_model(const boost::program_options::variables_map& vm) {
  return vm.count("onnx") > 0 || vm.count("saved-model") > 0;
}

absl::StatusOr<int64_t> seq_length_from(const boost::program_options::variables_map& vm,
                                        const std::string& model) {
  const int64_t seq = vm["seq-length"].as<int64_t>();
  auto info = runtime::models::model_info(model);
  if (!info.ok()) return info.status();
  if (info->input != runtime::models::ModelInfo::Input::kTokens) {
    if (!vm["seq-length"].defaulted())
      return absl::InvalidArgumentError(
          str_cat("--seq-length is for BERT models; ", model, " reads images"));
    return 0;
  }
  if (seq < 8 || seq > 512)
    return absl::InvalidArgumentError(str_cat(
        "--seq-length must be in [8, 512] (BERT's max_position_embeddings) (got ", seq, ")"));
  return seq;
}

}  // namespace tpusim::cli
