// The runtime's costs: one training step of a zoo model on the tpusim backend (compiled program
// on the simulated core, numerics on) against the cpu backend, and compile time per model. Its
// own binary: the tpusim backend owns the process's System.
#include <chrono>

#include <benchmark/benchmark.h>

#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/initializers.h"
#include "runtime/infeed/infeed_driver.h"
#include "runtime/models/zoo.h"
#include "runtime/opcheck/harness.h"

namespace {

using namespace tpusim::runtime;

std::vector<Feeds> batches(int64_t batch) {
  opcheck::OpCase c;
  c.inputs = {{"image", DType::kF32, {batch, 28, 28, 1}, 0, 1},
              {"label", DType::kS32, {batch}, 0, 10}};
  return {opcheck::make_feeds(c, 7)};
}

double step_seconds(const std::string& backend_name, const Graph& graph,
                    const std::vector<Feeds>& feeds) {
  auto backend = make_backend(backend_name);
  // Both at the MXU's bf16 products: cpu:mxu, and tpusim, which always computes so.
  auto exe = (*backend)->compile(graph, {tpusim::runtime::Precision::kMxu});
  Variables vars = initial_variables(graph);
  const auto t0 = std::chrono::steady_clock::now();
  auto out = (*backend)->run(**exe, vars, feeds, 0);
  const auto t1 = std::chrono::steady_clock::now();
  if (!out.ok()) return -1;
  return std::chrono::duration<double>(t1 - t0).count();
}

// One training step at `batch` per core: host seconds on tpusim / on cpu.
void BM_TrainingStep(benchmark::State& state, const char* model) {
  const int64_t batch = state.range(0);
  GraphBuilder b;
  if (!models::build_training_step(b, model, batch, 0.01f, 1).ok()) {
    state.SkipWithError("build failed");
    return;
  }
  const auto feeds = batches(batch);
  double tpu = 0, cpu = 0;
  for (auto _ : state) {
    tpu = step_seconds("tpusim", b.graph(), feeds);
    cpu = step_seconds("cpu", b.graph(), feeds);
    if (tpu < 0 || cpu < 0) state.SkipWithError("step failed");
  }
  state.counters["tpusim_s"] = tpu;
  state.counters["cpu_s"] = cpu;
  state.counters["tpusim_over_cpu"] = tpu / cpu;
}
// The infeed driver's host work per step: a global batch of 1024 Fashion-MNIST images (f32) and
// labels split over the 8 cores of a v3-8 and converted to their infeed tensors (the dataset's
// copy of the element included).
void BM_InfeedSplit(benchmark::State& state) {
  const int64_t batch = 1024;
  tpusim::runtime::data::FeatureValue images, labels;
  images.shape = {batch, 28, 28, 1};
  images.floats.assign(static_cast<size_t>(batch * 784), 0.5f);
  labels.type = tpusim::runtime::data::FeatureType::kInt64;
  labels.shape = {batch};
  labels.ints.assign(static_cast<size_t>(batch), 3);
  auto ds = tpusim::runtime::data::Dataset::from_elements({{{"image", images}, {"label", labels}}})
                ->repeat();
  GraphBuilder b;
  b.infeed("image", DType::kF32, {batch / 8, 28, 28, 1});
  b.infeed("label", DType::kS32, {batch / 8});
  InfeedOptions o;
  o.replicas = 8;
  o.timing.stages = {{"map", 1}};
  o.timing.stage_seconds = {0};
  auto driver = InfeedDriver::create(b.graph(), {{ds, nullptr}}, o);
  for (auto _ : state) {
    auto loop = (*driver)->next_loop(1, 0);
    benchmark::DoNotOptimize(loop);
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetBytesProcessed(state.iterations() * batch * (784 * 4 + 4));
}
BENCHMARK(BM_InfeedSplit)->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_TrainingStep, mlp, "mlp")
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_TrainingStep, mnist_cnn, "mnist_cnn")
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Graph construction (with autodiff) plus compilation to one core's program, batch 128.
void BM_Compile(benchmark::State& state, const char* model) {
  auto slice = tpusim::config::load_slice("v3-8");
  uint64_t instructions = 0;
  for (auto _ : state) {
    GraphBuilder b;
    if (!models::build_training_step(b, model, 128, 0.01f, 1).ok())
      state.SkipWithError("build failed");
    auto step = tpusim_backend::compile_graph(b.graph(), **slice, 0);
    if (!step.ok()) state.SkipWithError("compile failed");
    instructions = static_cast<uint64_t>(step->program->cores(0).instructions_size());
  }
  state.counters["instructions"] = static_cast<double>(instructions);
}
BENCHMARK_CAPTURE(BM_Compile, mlp, "mlp")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, mnist_cnn, "mnist_cnn")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, resnet_small, "resnet_small")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, transformer, "transformer")->Unit(benchmark::kMillisecond);

}  // namespace
