// Studies across MPI ranks (issue 37): an 8-point timing-only training sweep on 1 and 2 local
// ranks (its wall time: the target is 2 ranks in at most 0.6x the time of 1), and rank 0's own
// CPU time per point over 1,000 trivial points (matmul 8x8x8; the target is under 10 ms). Each
// runs `mpirun ... tpusim sweep` as a user would; results in bench/README.md.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("tpusim-study-bench-" + std::to_string(::getpid())) / name;
}

// `mpirun -np ranks tpusim sweep ...`; false when it failed.
bool mpi_sweep(int ranks, const std::string& sweep_args) {
  // mpirun refuses root unless told twice (this machine runs benchmarks as root).
  const std::string command =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np " +
      std::to_string(ranks) + " " + TPUSIM_CLI + " sweep " + sweep_args + " >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

nlohmann::json study_of(const fs::path& dir) {
  std::ifstream in(dir / "sweep.json");
  return nlohmann::json::parse(in)["study"];
}

// 8 points of mnist_cnn training, timing-only, 20 steps each on v3-8 at global batch 1024.
void BM_EightPointTrainingSweep(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const fs::path data = scratch("data"), dir = scratch("eight");
  for (auto _ : state) {
    fs::remove_all(dir);
    const bool ok =
        mpi_sweep(ranks, "--set iterations_per_loop=1,2,4,5 --set chip.core.mxu_count=1,2 --out " +
                             dir.string() + " -- train --model mnist_cnn --data " + data.string() +
                             " --train-steps 20 --timing-only --host-timing config");
    if (!ok) state.SkipWithError("the sweep failed (is mpirun installed? make deps)");
  }
  const nlohmann::json study = study_of(dir);
  state.counters["ranks"] = study["ranks"].get<double>();
  state.counters["points"] = study["points_run"].get<double>();
}
BENCHMARK(BM_EightPointTrainingSweep)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

// 1,000 points of an 8x8x8 matmul on 2 ranks: rank 0's CPU time per point is its bookkeeping
// (handing out, receiving, journaling, the tables).
void BM_CoordinatorPerPoint(benchmark::State& state) {
  const fs::path dir = scratch("thousand");
  std::string values;
  for (int m = 1; m <= 1000; ++m) values += (m > 1 ? "," : "") + std::to_string(m);
  for (auto _ : state) {
    fs::remove_all(dir);
    if (!mpi_sweep(2, "--set m=" + values + " --out " + dir.string() +
                          " -- matmul --k 8 --n 8 --timing-only"))
      state.SkipWithError("the sweep failed (is mpirun installed? make deps)");
  }
  const nlohmann::json study = study_of(dir);
  state.counters["points"] = study["points_run"].get<double>();
  state.counters["rank0_cpu_ms_per_point"] =
      1e3 * study["coordinator_cpu_seconds"].get<double>() / study["points_run"].get<double>();
  state.counters["wall_ms_per_point"] =
      1e3 * study["wall_seconds"].get<double>() / study["points_run"].get<double>();
}
BENCHMARK(BM_CoordinatorPerPoint)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // The 8-point sweep's data, written once before any timing.
  const std::string prepare = std::string(TPUSIM_CLI) + " train --model mnist_cnn --data " +
                              scratch("data").string() + " --train-steps 1 --timing-only " +
                              "--model-dir " + scratch("prepare").string() + " >/dev/null 2>&1";
  if (std::system(prepare.c_str()) != 0) return 1;
  benchmark::RunSpecifiedBenchmarks();
  fs::remove_all(scratch(""));
  return 0;
}
