// The gpu backend's training step (issue 36: mnist_cnn at a global batch of 1024 in at most
// 10 ms on an H100-class GPU): a zoo model's step (forward, backward, SGD update) over its
// replicas, as `tpusim train --backend gpu` runs it, loops of 10 steps after one untimed loop.
// With TPUSIM_GPU_PROFILE=FILE set the backend also writes where the step's time goes, node by
// node (runtime/backend/gpu/node_profile.h). Without a usable GPU it reports the probe's reason.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/gpu_bench_common.h"
#include "bench/training_step.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "runtime/models/zoo.h"

namespace {

using namespace tpusim::runtime;

constexpr int kStepsALoop = 10;

// Args: global batch, replicas, precision (0 fp32, 1 mxu). Counters: ms a step (wall clock on
// the host, the loop's read-backs included), the step's matmul GFLOP and their rate.
void BM_GpuTrainingStep(benchmark::State& state, const char* model) {
  if (!tpusim::bench::no_gpu().empty()) {
    state.SkipWithError(tpusim::bench::no_gpu().c_str());
    return;
  }
  const int64_t batch = state.range(0);
  const auto replicas = static_cast<uint32_t>(state.range(1));
  const auto precision =
      state.range(2) == 1 ? tpusim::runtime::Precision::kMxu : tpusim::runtime::Precision::kFp32;
  GraphBuilder b;
  if (!tpusim::bench::build_step(state, b, model, batch, replicas)) return;
  const Graph& graph = b.graph();
  auto prepared = tpusim::bench::prepare_step(state, "gpu", graph, precision, replicas);
  if (!prepared) return;
  auto& [backend, exe, vars] = *prepared;
  const std::vector<LoopStep> loop(
      kStepsALoop, LoopStep{tpusim::bench::replica_feeds(graph, replicas), nullptr, 0});
  uint64_t step_number = 0;
  if (auto first = backend->run_loop(*exe, vars, loop, step_number); !first.ok()) {
    state.SkipWithError(std::string(first.status().message()).c_str());
    return;
  }
  step_number += kStepsALoop;
  for (auto _ : state) {
    auto result = backend->run_loop(*exe, vars, loop, step_number);
    step_number += kStepsALoop;
    if (!result.ok()) state.SkipWithError(std::string(result.status().message()).c_str());
  }
  const double steps = static_cast<double>(state.iterations()) * kStepsALoop;
  const double flops = graph_size(graph).matmul_flops * replicas;
  state.counters["step_ms"] =
      benchmark::Counter(steps / 1e3, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["GFLOP"] = flops / 1e9;
  state.counters["TFLOPS"] = benchmark::Counter(flops * steps / 1e12, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(model) + ", " +
                 std::string(tpusim::runtime::kPrecisions.name(precision)));
}

BENCHMARK_CAPTURE(BM_GpuTrainingStep, mnist_cnn, "mnist_cnn")
    ->Args({1024, 8, 1})
    ->Args({1024, 8, 0})
    ->Args({1024, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
// The full-size models (issue 36, item 5) at 8 examples a replica on 8 replicas, as a v3-8 runs
// them (ResNet-50 at 224 x 224, BERT-Large at 128 tokens), and at 8 on one replica beside the
// cpu backend's figure (bench/README.md); one timed loop.
void full_size(benchmark::internal::Benchmark* b) {
  b->Args({64, 8, 1})->Args({64, 8, 0})->Args({8, 1, 0});
  b->Unit(benchmark::kMillisecond)->Iterations(1);
}

BENCHMARK_CAPTURE(BM_GpuTrainingStep, resnet50, "resnet50")->Apply(full_size);
BENCHMARK_CAPTURE(BM_GpuTrainingStep, bert_large, "bert_large")->Apply(full_size);

}  // namespace
