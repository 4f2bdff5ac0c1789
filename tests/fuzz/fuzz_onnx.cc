// ONNX files on any bytes: parsed (checker, opset, shape inference at batch 2), summarized and
// imported into a graph.
#include "runtime/onnx/importer.h"
#include "runtime/onnx/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ox = tpusim::runtime::onnx_import;
  auto model =
      ox::parse_onnx(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx", 2);
  if (!model.ok()) return 0;
  (void)ox::summarize(*model);
  tpusim::runtime::GraphBuilder b;
  std::map<std::string, tpusim::runtime::Value> inputs;
  for (const ox::TensorInfo& in : model->inputs)
    inputs[in.name] = b.infeed(in.name, in.dtype, in.shape);
  (void)ox::import_graph(b, *model, inputs, {});
  return 0;
}
