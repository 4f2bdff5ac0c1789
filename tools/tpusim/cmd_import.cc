// tpusim import FILE: an ONNX model as tpusim would import it (runtime/onnx/summary.h): its
// inputs and outputs at the batch, its ops, parameters and forward FLOPs per example, and every
// node it cannot import.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "runtime/onnx/importer.h"
#include "runtime/onnx/summary.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {
namespace {

namespace onnx_import = runtime::onnx_import;

nlohmann::ordered_json tensors_json(const std::vector<onnx_import::TensorInfo>& tensors) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& t : tensors) {
    out.push_back({{"name", t.name},
                   {"dtype", runtime::dtype_name(t.dtype)},
                   {"shape", t.shape.dims()},
                   {"batched", t.batched}});
  }
  return out;
}

nlohmann::ordered_json summary_json(const onnx_import::OnnxModel& m,
                                    const onnx_import::ModelSummary& s) {
  nlohmann::ordered_json unsupported = nlohmann::ordered_json::array();
  for (const auto& u : s.unsupported) unsupported.push_back({{"node", u.node}, {"op", u.op_type}});
  const bool imported = s.unsupported.empty();
  return {
      {"file", m.path},
      {"producer", m.producer},
      {"opset", m.opset},
      {"inputs", tensors_json(m.inputs)},
      {"outputs", tensors_json(s.outputs)},
      {"ops", s.ops},
      {"unsupported", unsupported},
      {"parameters", imported ? nlohmann::ordered_json(s.parameters) : nullptr},
      {"trainable_parameters", imported ? nlohmann::ordered_json(s.trainable_parameters) : nullptr},
      {"constant_elements", imported ? nlohmann::ordered_json(s.constant_elements) : nullptr},
      {"flops_per_example", imported ? nlohmann::ordered_json(s.flops_per_example) : nullptr}};
}

std::string tensors_text(const std::vector<onnx_import::TensorInfo>& tensors) {
  std::vector<std::string> parts;
  for (const auto& t : tensors) {
    parts.push_back(str_cat(t.name, " ", runtime::dtype_name(t.dtype), t.shape.str(),
                            t.batched ? " (the first dimension is the batch)" : ""));
  }
  return str_join(parts, ", ");
}

void print_summary(const onnx_import::OnnxModel& m, const onnx_import::ModelSummary& s) {
  int64_t nodes = 0;
  std::vector<std::string> ops;
  for (const auto& [op, count] : s.ops) {
    nodes += count;
    ops.push_back(str_cat(op, " ", count));
  }
  std::cout << m.path << ": " << (m.producer.empty() ? "unknown producer" : m.producer)
            << ", opset " << m.opset << "\n";
  std::cout << "  inputs       " << tensors_text(m.inputs) << "\n";
  std::cout << "  outputs      " << tensors_text(s.outputs) << "\n";
  std::cout << "  ops          " << nodes << " nodes: " << str_join(ops, ", ") << "\n";
  if (!s.unsupported.empty()) {
    std::vector<std::string> nodes_out;
    for (const auto& u : s.unsupported)
      nodes_out.push_back(str_cat(u.op_type, " (node '", u.node, "')"));
    std::cout << "  unsupported  " << str_join(nodes_out, ", ") << "\n";
    std::cout << "  tpusim imports " << str_join(onnx_import::supported_ops(), ", ") << "\n";
    return;
  }
  std::cout << "  parameters   " << s.parameters << " (" << s.trainable_parameters << " trainable, "
            << s.parameters - s.trainable_parameters << " batch-norm statistics); "
            << s.constant_elements << " constant elements\n";
  std::cout << "  FLOPs        " << fmt::format("{:.4g}", s.flops_per_example / 1e6)
            << " M per example, forward (matrix products: 2 a multiply-accumulate)\n";
}

}  // namespace

int run_import(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  int64_t batch = 1;
  po::options_description options("options");
  options.add_options()("file", po::value<std::string>(), "the ONNX model (.onnx)")(
      "batch", po::value<int64_t>(&batch)->default_value(1),
      "the batch its inputs' first dimension is bound to");
  add_json_flag(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  const std::string usage =
      "usage: tpusim import FILE [--batch N] [--json]\n\n"
      "Reads an ONNX model (opsets 11-17, weights inside the file), checks it with ONNX's\n"
      "checker and shape inference with each input's first dimension bound to the batch, and\n"
      "prints its inputs and outputs, its ops, its parameters and forward FLOPs per example, and\n"
      "every node tpusim cannot import (then exits 1).\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, positional, usage, &vm); rc >= 0) return rc;
  if (vm.count("file") == 0) return usage_error("which model? (FILE is required)", usage);
  if (batch < 1 || batch > (1 << 20)) return usage_error("--batch must be in [1, 2^20]", usage);
  auto model = onnx_import::load_onnx(vm["file"].as<std::string>(), batch);
  if (!model.ok()) return failure(std::string(model.status().message()));
  auto summary = onnx_import::summarize(*model);
  if (!summary.ok()) return failure(std::string(summary.status().message()));
  if (vm["json"].as<bool>()) {
    std::cout << json_text(summary_json(*model, *summary)) << "\n";
  } else {
    print_summary(*model, *summary);
  }
  return summary->unsupported.empty() ? kOk : kFailed;
}

}  // namespace tpusim::cli
