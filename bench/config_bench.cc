// Config loading cost: every sweep point and every CLI run loads and validates a slice once.
#include <benchmark/benchmark.h>

#include "configs/loader.h"

namespace {

void BM_LoadEmbeddedSlice(benchmark::State& state, const char* name) {
  for (auto _ : state) {
    auto slice = tpusim::config::load_slice(name);
    if (!slice.ok()) state.SkipWithError("load failed");
    benchmark::DoNotOptimize(slice);
  }
}
BENCHMARK_CAPTURE(BM_LoadEmbeddedSlice, v3_8, "v3-8")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LoadEmbeddedSlice, v3_2048, "v3-2048")->Unit(benchmark::kMicrosecond);

void BM_ValidateInlineSlice(benchmark::State& state) {
  auto slice = tpusim::config::load_slice("v3-8");
  const tpusim::config::SliceConfig proto = (*slice)->proto;
  for (auto _ : state) {
    auto again = tpusim::config::validate_slice(proto, "bench");
    benchmark::DoNotOptimize(again);
  }
}
BENCHMARK(BM_ValidateInlineSlice)->Unit(benchmark::kMicrosecond);

}  // namespace
