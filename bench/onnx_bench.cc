// The ONNX importer's speed (issue 34's target: ResNet-50 imported in at most 2 s): ResNet-50
// v1.5 as an ONNX file (tests/onnx/resnet50_onnx.h, 25.6 M parameters, 102 MB), parsed, checked,
// shape-inferred and imported into a graph at batch 1, timed as `tpusim import` does it.
// TPUSIM_ONNX_BENCH_OUT=FILE also writes the file, for `/usr/bin/time tpusim import FILE`.
#include <cstdlib>
#include <fstream>

#include <benchmark/benchmark.h>

#include "runtime/onnx/importer.h"
#include "tests/onnx/resnet50_onnx.h"

namespace {

using namespace tpusim::runtime;

const std::string& resnet50_bytes() {
  static const std::string bytes = [] {
    std::string b = onnx_import::testing::resnet50_v15(1).SerializeAsString();
    if (const char* out = std::getenv("TPUSIM_ONNX_BENCH_OUT"))
      std::ofstream(out, std::ios::binary) << b;
    return b;
  }();
  return bytes;
}

void BM_ImportResnet50(benchmark::State& state) {
  const std::string& bytes = resnet50_bytes();
  int64_t parameters = 0;
  for (auto _ : state) {
    auto model = onnx_import::parse_onnx(bytes, "resnet50.onnx", 1);
    if (!model.ok()) {
      state.SkipWithError(std::string(model.status().message()).c_str());
      return;
    }
    GraphBuilder b;
    const Value images = b.infeed("images", DType::kF32, {1, 3, 224, 224});
    auto imported = onnx_import::import_graph(b, *model, {{"images", images}}, {});
    if (!imported.ok()) {
      state.SkipWithError(std::string(imported.status().message()).c_str());
      return;
    }
    parameters = 0;
    for (const auto& [name, value] : imported->initial_values) parameters += value.elements();
    benchmark::DoNotOptimize(imported);
  }
  state.counters["parameters"] = static_cast<double>(parameters);
  state.counters["file_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_ImportResnet50)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
