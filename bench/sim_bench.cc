// The simulator's own speed: simulated cycles per host second (timing-only), the cost of the
// model's numerics against plain Eigen on the same GEMM, and `tpusim layers` on ResNet-50.
// SystemC elaborates once per process, so every benchmark shares one v3-8 System and switches
// its mode between runs.
#include <chrono>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include "configs/loader.h"
#include "runtime/lowering/gemm.h"
#include "runtime/lowering/weight_stationary_layers.h"
#include "runtime/workloads/scalesim_topology.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/reference.h"
#include "sim/system.h"

namespace {

using tpusim::runtime::GemmLayout;
using tpusim::runtime::GemmShape;
using tpusim::sim::ChipId;
using Matrix = tpusim::sim::MatrixF;

tpusim::sim::System& shared_system() {
  static std::unique_ptr<tpusim::sim::System> system = [] {
    auto slice = tpusim::config::load_slice("v3-8");
    return std::move(
        *tpusim::sim::System::create(*slice, {tpusim::sim::MxuPolicy::kTpu, true, nullptr}));
  }();
  return *system;
}

tpusim::runtime::GemmPlan plan_for(GemmShape shape, GemmLayout* layout,
                                   tpusim::isa::DType inputs = tpusim::isa::F32) {
  tpusim::runtime::pack_gemm_layout(shape, inputs, 0, layout);
  return *tpusim::runtime::lower_gemm(shared_system().slice(), 0, shape, tpusim::isa::DEFAULT,
                                      *layout);
}

// A long GEMM chain, timing-only: how many simulated cycles one host second buys.
void BM_GemmTimingOnly(benchmark::State& state) {
  const auto s = static_cast<uint32_t>(state.range(0));
  auto& system = shared_system();
  system.set_timing_only(true);
  GemmLayout layout;
  const auto plan = plan_for({s, s, s}, &layout);
  uint64_t cycles = 0;
  double utilization = 0;
  for (auto _ : state) {
    auto run = system.run(plan.program);
    if (!run.ok()) state.SkipWithError("run failed");
    cycles += run->cycles();
    utilization = system.report(*run).cores.at(0).mxu_utilization;
  }
  state.counters["sim_cycles_per_host_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["instructions"] = static_cast<double>(plan.program.cores(0).instructions_size());
  state.counters["mxu_utilization"] = utilization;
}
BENCHMARK(BM_GemmTimingOnly)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond);

// The same GEMM with numerics on the model, and in plain Eigen (one f32 GEMM of the same
// shape): the ratio of host times is the cost of simulating with values. range(1) picks the
// inputs' dtype in HBM: 0 f32 (the MXU rounds them), 1 bf16 (a bf16 GEMM: Eigen multiplies the
// same bf16 values as f32).
void BM_GemmNumerics(benchmark::State& state) {
  const auto s = static_cast<uint32_t>(state.range(0));
  const bool bf16 = state.range(1) == 1;
  auto& system = shared_system();
  system.set_timing_only(false);
  GemmLayout layout;
  const auto plan = plan_for({s, s, s}, &layout, bf16 ? tpusim::isa::BF16 : tpusim::isa::F32);
  Matrix a = tpusim::sim::random_uniform(s, s, 1), b = tpusim::sim::random_uniform(s, s, 2);
  if (bf16) {
    a = tpusim::sim::rounded_to_bf16(a);
    b = tpusim::sim::rounded_to_bf16(b);
    std::vector<uint16_t> half(static_cast<size_t>(a.size()));
    for (size_t i = 0; i < half.size(); ++i) half[i] = tpusim::sim::f32_to_bf16_bits(a.data()[i]);
    (void)system.write_hbm(ChipId{0}, layout.a_address, half.data(), 2 * half.size());
    for (size_t i = 0; i < half.size(); ++i) half[i] = tpusim::sim::f32_to_bf16_bits(b.data()[i]);
    (void)system.write_hbm(ChipId{0}, layout.b_address, half.data(), 2 * half.size());
  } else {
    (void)system.write_hbm(ChipId{0}, layout.a_address, a.data(), 4 * a.size());
    (void)system.write_hbm(ChipId{0}, layout.b_address, b.data(), 4 * b.size());
  }
  // Steady state: one untimed run of each first (the model allocates its memories, Eigen its
  // packing buffers), and Eigen writes into a preallocated result as the model does.
  (void)system.run(plan.program);
  Matrix c(s, s);
  c.noalias() = a * b;
  double model = 0, eigen = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto run = system.run(plan.program);
    auto t1 = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(c.data());
    if (!run.ok()) state.SkipWithError("run failed");
    model += std::chrono::duration<double>(t1 - t0).count();
    eigen += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["model_s"] = model / static_cast<double>(state.iterations());
  state.counters["eigen_s"] = eigen / static_cast<double>(state.iterations());
  state.counters["model_over_eigen"] = model / eigen;
  system.set_timing_only(true);
}
BENCHMARK(BM_GemmNumerics)
    ->ArgsProduct({{1024, 2048, 4096}, {0, 1}})
    ->ArgNames({"n", "bf16"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
// The headline size: one timed iteration (about 12 s of model time).
BENCHMARK(BM_GemmNumerics)
    ->Args({8192, 1})
    ->ArgNames({"n", "bf16"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// `tpusim layers` on resnet50_mlperf.csv: every layer lowered and simulated, timing-only.
void BM_LayersResnet50(benchmark::State& state) {
  auto& system = shared_system();
  system.set_timing_only(true);
  system.set_mxu_policy(tpusim::sim::MxuPolicy::kScaleSimWs);
  auto layers = tpusim::runtime::read_scalesim_topology(
      std::string(TPUSIM_SOURCE_DIR) +
      "/tests/runtime/data/scalesim_topologies/resnet50_mlperf.csv");
  if (!layers.ok()) {
    state.SkipWithError(std::string(layers.status().message()).c_str());
    return;
  }
  uint64_t total = 0;
  for (auto _ : state) {
    total = 0;
    for (const auto& layer : *layers) {
      auto program = tpusim::runtime::lower_weight_stationary_layer(system.slice(), 0, layer);
      auto run = system.run(program->program);
      total += run->cycles() - 1;
    }
  }
  state.counters["total_cycles"] = static_cast<double>(total);
  system.set_mxu_policy(tpusim::sim::MxuPolicy::kTpu);
}
BENCHMARK(BM_LayersResnet50)->Unit(benchmark::kMillisecond);

}  // namespace
