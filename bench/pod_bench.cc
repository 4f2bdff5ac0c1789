// A training step on a slice of many hosts, simulated in full or with replica folding
// (CompileOptions::simulated_replicas), its gradients' all-reduces apart or combined
// (CompileOptions::allreduce_combine_bytes): host time per step, the simulated step, and the
// process's peak resident memory after each. Its own binary: the tpusim backend owns the process's System
// (a v4-128, 128 cores on 16 hosts). Folded runs first, since peak memory only grows.
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/tpusim/tpusim_backend.h"
#include "runtime/graph/initializers.h"
#include "runtime/models/zoo.h"

namespace {

using namespace tpusim::runtime;

constexpr uint32_t kReplicas = 128;  // v4-128's cores
constexpr int64_t kBatch = 128;      // per replica
constexpr int kSteps = 5;            // one device loop

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// mnist_cnn with CrossShardOptimizer over 128 replicas, timing-only, `simulated` of them
// cycle-level (0: all), its all-reduces combined up to `combine_mib` MiB (0: apart).
void BM_PodTrainingLoop(benchmark::State& state) {
  const auto simulated = static_cast<uint32_t>(state.range(0));
  const auto combine_mib = static_cast<uint64_t>(state.range(1));
  GraphBuilder b;
  if (!models::build_training_step(b, "mnist_cnn", kBatch, 0.01f, 1,
                                   models::DTypePolicy::kFloat32, kReplicas)
           .ok()) {
    state.SkipWithError("build failed");
    return;
  }
  static std::unique_ptr<Backend> backend = make_tpusim_backend("v4-128");
  CompileOptions options;
  options.replicas = kReplicas;
  options.simulated_replicas = simulated;
  options.allreduce_combine_bytes = combine_mib << 20;
  auto exe = backend->compile(b.graph(), options);
  if (!exe.ok() || !backend->set_timing_only(true).ok()) {
    state.SkipWithError("compile failed");
    return;
  }
  Variables vars = initial_variables(b.graph());
  const Feeds feeds = {{"image", HostTensor::zeros(DType::kF32, Shape{kBatch, 28, 28, 1})},
                       {"label", HostTensor::zeros(DType::kS32, Shape{kBatch})}};
  std::vector<LoopStep> loop(kSteps);
  for (LoopStep& s : loop) s.replicas.assign((*exe)->simulated_replicas(), feeds);
  double simulated_seconds = 0;
  for (auto _ : state) {
    auto run = backend->run_loop(**exe, vars, loop, 0);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    simulated_seconds = run->timing.seconds;
  }
  state.counters["host_s_per_step"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kSteps),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["simulated_ms_per_step"] = simulated_seconds * 1e3 / kSteps;
  state.counters["peak_rss_mb"] = peak_rss_mb();
}
BENCHMARK(BM_PodTrainingLoop)
    ->ArgNames({"simulated", "combine_mib"})
    ->Args({8, 0})
    ->Args({8, 4})
    ->Args({0, 0})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

