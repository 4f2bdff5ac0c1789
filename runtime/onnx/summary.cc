#include "runtime/onnx/summary.h"

#include <set>

#include "runtime/onnx/importer.h"
#include "runtime/onnx/importer_context.h"

namespace tpusim::runtime::onnx_import {

absl::StatusOr<ModelSummary> summarize(const OnnxModel& model) {
  ModelSummary s;
  s.outputs = model.outputs;
  const std::vector<std::string> ops = supported_ops();
  const std::set<std::string> known(ops.begin(), ops.end());
  for (const onnx::NodeProto& node : model.proto.graph().node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    const std::string op = default_domain ? node.op_type() : node.domain() + "::" + node.op_type();
    ++s.ops[op];
    if (!default_domain || known.count(op) == 0) s.unsupported.push_back({node_label(node), op});
  }
  if (!s.unsupported.empty()) return s;
  GraphBuilder b;
  std::map<std::string, Value> inputs;
  for (const TensorInfo& in : model.inputs) inputs[in.name] = b.infeed(in.name, in.dtype, in.shape);
  auto imported = import_graph(b, model, inputs, ImportOptions{});
  if (!imported.ok()) return imported.status();
  const std::set<std::string> statistics(imported->statistics.begin(), imported->statistics.end());
  for (const auto& [name, value] : imported->initial_values) {
    s.parameters += value.elements();
    if (statistics.count(name) == 0) s.trainable_parameters += value.elements();
  }
  int64_t batch = 1;
  for (const TensorInfo& in : model.inputs) {
    if (in.batched) batch = in.shape.dim(0);
  }
  for (const Node& n : b.graph().nodes()) {
    if (n.op == Op::kConstant) s.constant_elements += n.shape.elements();
  }
  s.flops_per_example = graph_size(b.graph()).matmul_flops / static_cast<double>(batch);
  for (TensorInfo& out : s.outputs) out.shape = imported->outputs.at(out.name).shape();
  return s;
}

}  // namespace tpusim::runtime::onnx_import
