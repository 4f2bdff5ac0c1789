// sim::run_all_reduce, the all-reduce `tpusim allreduce` runs: its checks name the figures, every
// core ends with the same sum, and the time stays within the algorithm's bound. One System per
// process.
#include "sim/all_reduce_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/host_budget.h"
#include "configs/loader.h"
#include "sim/core_map.h"

namespace tpusim::sim {
namespace all_reduce_run_test {

using ::testing::HasSubstr;

TEST(AllReduceRun, EveryCoreEndsWithTheSameSumWithinTheBound) {
  auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  AllReduceRequest request;
  request.bytes = 1 << 20;
  request.chunk_bytes = 64 << 10;
  auto run = run_all_reduce(*slice, request, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->numerics.has_value());
  EXPECT_TRUE(run->numerics->bitwise_identical_on_every_core);
  // Eight inputs in [-0.5, 0.5) summed in f32: a few ulps of 4 at most.
  EXPECT_LT(run->numerics->max_abs_error_vs_f64_sum, 1e-5);
  EXPECT_GT(run->cycles, 0u);
  // No schedule beats the busiest link's bytes at its bandwidth. The ring formula charges every
  // edge the slowest link and all of its latency, which a pipelined ring through the chips'
  // faster on-chip links beats, but not by much.
  EXPECT_GT(run->link_floor_seconds, 0);
  EXPECT_LE(run->link_floor_seconds, run->seconds);
  EXPECT_GT(run->bound.seconds / run->seconds, 0.5);
  EXPECT_LT(run->bound.seconds / run->seconds, 2.0);
  EXPECT_GT(run->chunk_transfers, 0);
}

TEST(AllReduceRun, TheProgramPutsEachCoresBuffersAtItsShare) {
  auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  AllReduceRequest request;
  request.bytes = 4096;
  request.chunk_bytes = 1024;
  const isa::Program program = all_reduce_program(**slice, request);
  ASSERT_EQ(program.cores_size(), static_cast<int>((*slice)->cores));
  for (int i = 0; i < program.cores_size(); ++i) {
    const isa::Collective& c = program.cores(i).instructions(0).collective();
    const uint64_t base = hbm_share(**slice, CoreId{static_cast<uint32_t>(i)}).base;
    EXPECT_EQ(c.src(), base) << i;
    EXPECT_EQ(c.dst(), base + 4096) << i;
    EXPECT_EQ(c.elements(), 1024u) << i;
    EXPECT_EQ(c.chunk_bytes(), 1024u) << i;
  }
}

TEST(AllReduceRun, RequestsThatCannotRunAreRefusedWithTheirFigures) {
  auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  AllReduceRequest request;
  request.bytes = 6;
  EXPECT_THAT(std::string(check_all_reduce(**slice, request).message()), HasSubstr("6 bytes"));
  request.bytes = 4096;
  request.chunk_bytes = 2;
  EXPECT_THAT(std::string(check_all_reduce(**slice, request).message()),
              HasSubstr("chunks of 2 bytes"));
  request.chunk_bytes = 1024;
  const uint64_t share = hbm_share(**slice, CoreId{0}).bytes;
  request.bytes = share;
  request.timing_only = true;
  EXPECT_THAT(std::string(check_all_reduce(**slice, request).message()),
              HasSubstr("HBM share of " + std::to_string(share)));
  // 8 cores x 4 GiB (the most a v3 core's HBM share takes in and out): 4 x 8 x 4 GiB in the
  // simulated HBM and 5 x 4 GiB on the host, held against this host's memory budget.
  request.bytes = 4ull << 30;
  request.timing_only = false;
  EXPECT_EQ(all_reduce_host_bytes(**slice, request), 37 * request.bytes);
  if (all_reduce_host_bytes(**slice, request) > host_memory_budget().bytes) {
    EXPECT_THAT(std::string(check_all_reduce(**slice, request).message()),
                HasSubstr("computing the values of 4294967296 bytes on each of 8 cores (in, out "
                          "and the interconnect's chunks in the simulated HBM, and the host's "
                          "copies) needs 158.91 GB, over this host's memory budget of"));
  }
  request.timing_only = true;
  EXPECT_TRUE(check_all_reduce(**slice, request).ok());
  EXPECT_FALSE(run_all_reduce(*slice, AllReduceRequest{}, nullptr).ok());
}

}  // namespace all_reduce_run_test
}  // namespace tpusim::sim
