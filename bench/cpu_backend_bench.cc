// The cpu backend's speed on a zoo model's fp32 training step (forward, backward, SGD update),
// the figure bench/README.md tables beside JAX's step of the same network on the same machine
// (bench/jax_training_step.py), and the full-size models' steps. No System: the cpu backend
// alone.
#include <chrono>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/training_step.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "runtime/models/zoo.h"
#include "runtime/opcheck/harness.h"

namespace {

using namespace tpusim::runtime;
using tpusim::bench::replica_feeds;

// Each iteration runs one training step at fp32 (CompileOptions precision kFp32: matmul
// inputs as they are), after one untimed step. Counters: seconds a step, the step's matmul
// GFLOP (convolutions included, all replicas) and the rate they ran at.
void time_training_steps(benchmark::State& state, const Graph& graph, uint32_t replicas) {
  auto prepared =
      tpusim::bench::prepare_step(state, "cpu", graph, tpusim::runtime::Precision::kFp32, replicas);
  if (!prepared) return;
  auto& [backend, exe, vars] = *prepared;
  const std::vector<LoopStep> step{{replica_feeds(graph, replicas), nullptr, 0}};
  // One step first, untimed (as JAX's warm-up steps): the backend's buffer pool fills on it.
  uint64_t step_number = 0;
  if (auto first = backend->run_loop(*exe, vars, step, step_number++); !first.ok()) {
    state.SkipWithError(std::string(first.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    auto result = backend->run_loop(*exe, vars, step, step_number++);
    if (!result.ok()) state.SkipWithError(std::string(result.status().message()).c_str());
  }
  const double flops = graph_size(graph).matmul_flops * replicas;
  state.counters["step_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["GFLOP"] = flops / 1e9;
  state.counters["GFLOPS"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// A zoo model's step on Fashion-MNIST-sized inputs: the global batch and the replicas it is
// split over (the cpu backend runs a step's replicas in lockstep, as `tpusim train --backend
// cpu`).
void BM_CpuTrainingStep(benchmark::State& state, const char* model) {
  const int64_t batch = state.range(0);
  const auto replicas = static_cast<uint32_t>(state.range(1));
  GraphBuilder b;
  if (!tpusim::bench::build_step(state, b, model, batch, replicas)) return;
  time_training_steps(state, b.graph(), replicas);
}

// The full-size models at their published input sizes (ResNet-50 on 224 x 224 images, BERT on
// 128 tokens), one replica, at a batch that fits this machine's memory.
void BM_CpuFullSizeStep(benchmark::State& state, const char* model) {
  GraphBuilder b;
  if (!models::build_training_step(b, model, state.range(0), 0.01f, 1,
                                   models::DTypePolicy::kFloat32, 1)
           .ok()) {
    state.SkipWithError("build failed");
    return;
  }
  time_training_steps(state, b.graph(), 1);
}

// Global batch 1024 on one replica and on 8 (the and `tpusim train`'s default), and
// the batch of 128 the tests use.
void batches(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "replicas"});
  b->Args({128, 1})->Args({1024, 1})->Args({1024, 8});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
}

// Batch 8, two timed steps (a bert_large step takes seconds).
void full_size(benchmark::internal::Benchmark* b) {
  b->ArgName("batch")->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
}

BENCHMARK_CAPTURE(BM_CpuTrainingStep, mnist_cnn, "mnist_cnn")->Apply(batches);
BENCHMARK_CAPTURE(BM_CpuTrainingStep, resnet_small, "resnet_small")->Apply(batches);
BENCHMARK_CAPTURE(BM_CpuTrainingStep, transformer, "transformer")->Apply(batches);
BENCHMARK_CAPTURE(BM_CpuFullSizeStep, resnet50, "resnet50")->Apply(full_size);
BENCHMARK_CAPTURE(BM_CpuFullSizeStep, bert_large, "bert_large")->Apply(full_size);

}  // namespace

BENCHMARK_MAIN();
