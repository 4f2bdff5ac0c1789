// The collectives' simulation cost at scale: a 100 MB all-reduce over the 2048 cores of a
// 1024-chip v3 pod (v3-2048), timing-only, with each algorithm. Its own process: the System is
// built once for the pod. Target (issue 6): under 30 s of host time per run.
#include <benchmark/benchmark.h>

#include "configs/loader.h"
#include "sim/all_reduce_run.h"
#include "sim/system.h"

namespace {

using namespace tpusim;

sim::System& pod() {
  static std::unique_ptr<sim::System> system = [] {
    auto slice = config::load_slice("v3-2048");
    return *sim::System::create(*slice, {sim::MxuPolicy::kTpu, /*timing_only=*/true, nullptr});
  }();
  return *system;
}

void BM_PodAllReduce(benchmark::State& state) {
  const auto algorithm = static_cast<isa::Collective::Algorithm>(state.range(0));
  const uint64_t bytes = 100'000'000;
  sim::System& system = pod();
  const config::SliceSpec& s = system.slice();
  sim::AllReduceRequest request;
  request.bytes = bytes;
  request.algorithm = algorithm;
  request.timing_only = true;
  const isa::Program program = sim::all_reduce_program(s, request);
  double seconds = 0, transfers = 0;
  for (auto _ : state) {
    auto run = system.run(program);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    seconds = static_cast<double>(run->cycles()) / system.clock().frequency_hz();
    transfers = system.stats().value("interconnect.chunk_transfers");
  }
  state.counters["simulated_ms"] = seconds * 1e3;
  state.counters["chunk_transfers"] = transfers;
}
BENCHMARK(BM_PodAllReduce)
    ->ArgName("algorithm")
    ->Arg(isa::Collective::RING)
    ->Arg(isa::Collective::BIDIR_RING)
    ->Arg(isa::Collective::TORUS_2D)
    ->Arg(isa::Collective::TORUS)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
