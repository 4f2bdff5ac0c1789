#include "tests/onnx/onnx_test_util.h"

#include <onnx/defs/parser.h>

#include "common/strings.h"
#include "runtime/backend/cpu/cpu_backend.h"

namespace tpusim::runtime::onnx_import::testing {

std::string model_bytes(const std::string& text) {
  onnx::ModelProto m;
  const auto status = onnx::OnnxParser::Parse(m, text.c_str());
  if (!status.IsOK()) return "parse error: " + status.ErrorMessage();
  return m.SerializeAsString();
}

absl::StatusOr<Run> import_and_run(const std::string& text, int64_t batch,
                                   const std::map<std::string, HostTensor>& feeds, bool training,
                                   DType compute) {
  auto model = parse_onnx(model_bytes(text), "test.onnx", batch);
  if (!model.ok()) return model.status();
  GraphBuilder b;
  std::map<std::string, Value> inputs;
  for (const TensorInfo& in : model->inputs) {
    Value v = b.infeed(in.name, in.dtype, in.shape);
    if (compute == DType::kBF16 && in.dtype == DType::kF32) v = b.cast(v, DType::kBF16);
    inputs[in.name] = v;
  }
  ImportOptions options;
  options.training = training;
  options.compute = compute;
  auto imported = import_graph(b, *model, inputs, options);
  if (!imported.ok()) return imported.status();
  for (const auto& [name, v] : imported->outputs)
    b.output(name, v.dtype() == DType::kBF16 ? b.cast(v, DType::kF32) : v);
  if (!b.status().ok()) return b.status();
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  auto exe = backend->compile(b.graph(), {Precision::kFp32});
  if (!exe.ok()) return exe.status();
  Variables variables = imported->initial_values;
  auto out = backend->run(**exe, variables, {feeds}, 0);
  if (!out.ok()) return out.status();
  Run run;
  run.imported = *std::move(imported);
  run.graph = b.graph();
  run.outputs = (*out)[0];
  return run;
}

int count_ops(const Graph& graph, Op op) {
  int n = 0;
  for (int id = 0; id < graph.size(); ++id) n += graph.node(id).op == op;
  return n;
}

}  // namespace tpusim::runtime::onnx_import::testing
