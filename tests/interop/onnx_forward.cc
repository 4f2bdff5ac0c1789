// tpusim_onnx_forward MODEL.onnx INPUTS.json BACKEND OUTPUTS.json: imports MODEL with its inputs'
// batch from INPUTS.json ({"NAME": {"shape": [...], "values": [...]}}) and runs its forward
// pass once on BACKEND (cpu: fp32; tpusim: a v3-8 core, the MXU's bf16) with the file's weights,
// writing {"NAME": {"shape": [...], "values": [...]}} for every output. The interop tier compares
// them with onnxruntime's (check_onnx_import.py).
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "runtime/backend/registry.h"
#include "runtime/onnx/importer.h"

namespace {

using namespace tpusim::runtime;

int fail(const std::string& message) {
  std::cerr << "tpusim_onnx_forward: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5)
    return fail("usage: tpusim_onnx_forward MODEL.onnx INPUTS.json BACKEND OUTPUTS.json");
  std::ifstream in(argv[2]);
  const nlohmann::json given = nlohmann::json::parse(in, nullptr, false);
  if (given.is_discarded() || !given.is_object() || given.empty()) return fail("bad inputs JSON");
  const int64_t batch = given.begin()->at("shape").at(0).get<int64_t>();
  auto model = onnx_import::load_onnx(argv[1], batch);
  if (!model.ok()) return fail(std::string(model.status().message()));
  GraphBuilder b;
  std::map<std::string, Value> inputs;
  Feeds feeds;
  for (const onnx_import::TensorInfo& t : model->inputs) {
    if (!given.contains(t.name)) return fail("no values for input " + t.name);
    inputs[t.name] = b.infeed(t.name, t.dtype, t.shape);
    HostTensor v;
    v.dtype = t.dtype == DType::kS32 ? DType::kS32 : DType::kF32;
    v.shape = t.shape;
    for (const auto& x : given[t.name].at("values")) {
      if (v.dtype == DType::kS32) {
        v.i.push_back(x.get<int32_t>());
      } else {
        v.f.push_back(x.get<float>());
      }
    }
    feeds[t.name] = std::move(v);
  }
  auto imported = onnx_import::import_graph(b, *model, inputs, {});
  if (!imported.ok()) return fail(std::string(imported.status().message()));
  for (const auto& [name, v] : imported->outputs) b.output(name, v);
  if (!b.status().ok()) return fail(std::string(b.status().message()));
  auto backend = make_backend(argv[3]);
  if (!backend.ok()) return fail(std::string(backend.status().message()));
  CompileOptions options;
  // tpusim computes at its MXU's precision; the cpu and gpu in fp32.
  options.precision = effective_precision((*backend)->declaration(), Precision::kFp32);
  auto exe = (*backend)->compile(b.graph(), options);
  if (!exe.ok()) return fail(std::string(exe.status().message()));
  Variables variables = imported->initial_values;
  auto out = (*backend)->run(**exe, variables, {feeds}, 0);
  if (!out.ok()) return fail(std::string(out.status().message()));
  nlohmann::json result;
  for (const auto& [name, t] : (*out)[0]) {
    result[name] = {{"shape", t.shape.dims()}, {"values", t.f}};
  }
  std::ofstream(argv[4]) << result.dump();
  return 0;
}
