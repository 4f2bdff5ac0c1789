// The tpusim backend with a cycle cap (BackendArgs::max_run_cycles): a run past it stops with
// the cap named, and the process's System runs the next graph; a backend asking another cap of
// the same process is refused, since SystemC elaborates one System a process. One test a process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/builder.h"

namespace tpusim::runtime {
namespace tpusim_cycle_cap_test {

using ::testing::HasSubstr;

// x [rows, 128] times a [128, 128] constant: rows decide how long the step runs.
Graph product_graph(int64_t rows) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, Shape{rows, 128});
  const Value w = b.constant(HostTensor::zeros(DType::kF32, Shape{128, 128}));
  b.output("y", b.matmul(x, w));
  return b.graph();
}

absl::StatusOr<std::vector<Outputs>> run_once(Backend& backend, int64_t rows) {
  auto exe = backend.compile(product_graph(rows), CompileOptions{});
  if (!exe.ok()) return exe.status();
  Variables variables;
  Feeds feeds{{"x", HostTensor::zeros(DType::kF32, Shape{rows, 128})}};
  return backend.run(**exe, variables, {feeds}, 0);
}

TEST(TpusimCycleCap, ARunPastTheCapStopsAndTheNextRuns) {
  BackendArgs args;
  args.max_run_cycles = 100000;
  auto backend = make_backend("tpusim", args);
  ASSERT_TRUE(backend.ok()) << backend.status();
  // 65536 rows (32 MiB over the host link, about 2 ms) take far more than 100,000 cycles.
  auto long_run = run_once(**backend, 65536);
  ASSERT_FALSE(long_run.ok());
  EXPECT_EQ(long_run.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(long_run.status().message()),
              HasSubstr("the run's limit of 100000 cycles (max_run_cycles)"));
  // The System recovered: a step within the cap runs on the same backend.
  auto short_run = run_once(**backend, 8);
  ASSERT_TRUE(short_run.ok()) << short_run.status();
  ASSERT_EQ(short_run->size(), 1u);
  EXPECT_EQ(short_run->at(0).at("y").shape, (Shape{8, 128}));
  // Another cap in the same process is refused by name.
  auto uncapped = make_backend("tpusim", BackendArgs{});
  ASSERT_TRUE(uncapped.ok()) << uncapped.status();
  auto refused = run_once(**uncapped, 8);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("stops runs at 100000 cycles (0: never), not 0"));
}

}  // namespace tpusim_cycle_cap_test
}  // namespace tpusim::runtime
