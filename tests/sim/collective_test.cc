// Collectives on the simulated interconnect: every kind and algorithm against a host sum in the
// same order (bitwise), on 2, 8 and 32 cores; latency and bandwidth against the formulas;
// contention; bad collectives refused or diagnosed. One System per process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/net/collective_bound.h"
#include "sim/net/topology.h"
#include "sim/numerics/random.h"
#include "tests/sim/collective_util.h"
#include "tests/sim/core_ids.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace collective_test {

using testing::base_of;
using ::testing::HasSubstr;
using testing::kDst;
using testing::kSrc;
using testing::make_system;
using testing::Result;
using testing::ring_all_reduce;
using testing::ring_sum;
using testing::run_collective;
using testing::values_of;
using C = isa::Collective;

void expect_all_equal(const Result& r, const std::vector<float>& want) {
  for (const auto& [core, d] : r.dst) {
    ASSERT_EQ(d.size(), want.size());
    EXPECT_EQ(std::memcmp(d.data(), want.data(), d.size() * 4), 0) << "core " << core;
  }
}

TEST(Collective, RingAllReduceOnTwoCoresIsTheHostSum) {
  auto s = make_system("v3-8");
  const auto r = run_collective(*s, C::ALL_REDUCE, C::RING, 1001, {0, 1});
  expect_all_equal(r, ring_all_reduce({0, 1}, 1001));
}

// 8 cores of a v3-8 in snake order; 1001 elements split unevenly, chunks of 256 bytes.
TEST(Collective, EveryAllReduceAlgorithmMatchesTheHostSumInItsOrderOnEightCores) {
  auto s = make_system("v3-8");
  const std::vector<uint32_t> snake = {0, 1, 2, 3, 7, 6, 5, 4};
  const uint64_t n = 1001;
  expect_all_equal(run_collective(*s, C::ALL_REDUCE, C::RING, n, {}, 256),
                   ring_all_reduce(snake, n));
  // Bidirectional: the first half forward round the ring, the second half backward.
  std::vector<float> bidir = ring_all_reduce(snake, n, 0, n / 2);
  const auto back = ring_all_reduce({4, 5, 6, 7, 3, 2, 1, 0}, n, n / 2, n - n / 2);
  bidir.insert(bidir.end(), back.begin(), back.end());
  expect_all_equal(run_collective(*s, C::ALL_REDUCE, C::BIDIR_RING, n, {}, 256), bidir);
  // 2D torus: rows {0,1,2,3} and {4,5,6,7} reduce-scatter, columns all-reduce their segment,
  // rows all-gather. Segment x of a row, then summed down column x in column order.
  const auto torus = run_collective(*s, C::ALL_REDUCE, C::TORUS_2D, n, {}, 256);
  std::vector<float> want(n);
  for (uint32_t x = 0; x < 4; ++x) {
    const uint64_t begin = x * (n / 4) + std::min<uint64_t>(x, n % 4);
    const uint64_t size = n / 4 + (x < n % 4 ? 1 : 0);
    const auto row0 = ring_sum({0, 1, 2, 3}, n, begin, size, x);
    const auto row1 = ring_sum({4, 5, 6, 7}, n, begin, size, x);
    // The column {x, x+4} splits the segment in two; each half summed starting at the other.
    const uint64_t half = size / 2 + size % 2;
    for (uint64_t i = 0; i < size; ++i) {
      want[begin + i] = i < half ? row1[i] + row0[i] : row0[i] + row1[i];
    }
  }
  expect_all_equal(torus, want);
}

TEST(Collective, ReduceScatterAllGatherAndPermuteOnEightCores) {
  auto s = make_system("v3-8");
  const std::vector<uint32_t> ring = {0, 1, 2, 3, 4, 5, 6, 7};
  const uint64_t n = 64;
  const auto rs = run_collective(*s, C::REDUCE_SCATTER, C::RING, n, ring);
  for (uint32_t i = 0; i < 8; ++i) {
    const auto want = ring_sum(ring, n, i * 8, 8, i);
    EXPECT_EQ(rs.dst.at(i), want) << "member " << i;
  }
  const auto ag = run_collective(*s, C::ALL_GATHER, C::RING, n, ring);
  std::vector<float> gathered;
  for (uint32_t c : ring) {
    const auto v = values_of(c, n);
    gathered.insert(gathered.end(), v.begin(), v.end());
  }
  expect_all_equal(ag, gathered);
  std::map<uint32_t, uint32_t> shift;
  for (uint32_t c = 0; c < 8; ++c) shift[c] = (c + 3) % 8;
  const auto perm = run_collective(*s, C::PERMUTE, C::ALGORITHM_UNSPECIFIED, n, ring, 0, shift);
  for (uint32_t c = 0; c < 8; ++c) EXPECT_EQ(perm.dst.at((c + 3) % 8), values_of(c, n));
}

TEST(Collective, AllReduceOnThirtyTwoCoresIsBitwiseTheSameEverywhere) {
  auto s = make_system("v3-32");
  const Topology t(s->slice());
  const uint64_t n = 4099;
  std::vector<double> sum(n, 0.0);
  for (uint32_t c = 0; c < 32; ++c) {
    const std::vector<float> v = values_of(c, n);
    for (uint64_t i = 0; i < n; ++i) sum[i] += v[i];
  }
  for (C::Algorithm a : {C::RING, C::BIDIR_RING, C::TORUS_2D, C::TORUS}) {
    const auto r = run_collective(*s, C::ALL_REDUCE, a, n, {}, 1024);
    const std::vector<float>& first = r.dst.begin()->second;
    for (const auto& [core, d] : r.dst)
      EXPECT_EQ(d, first) << "core " << core << " algorithm " << a;
    if (a == C::RING) expect_all_equal(r, ring_all_reduce(numbers(t.snake_ring()), n));
    double worst = 0;
    for (uint64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(sum[i] - first[i]));
    EXPECT_LT(worst, 1e-5) << "algorithm " << a;
  }
}

// Four chips' core 0 in a ring of single ICI hops (chip 0 -> 1 -> 3 -> 2): each of the
// 2(p-1) = 6 steps of a tiny all-reduce costs one hop latency (1 us = 940 cycles) and almost no
// transfer, between the members' first read from HBM and their last write to it (500 ns = 470
// cycles each; the other reads and writes hide under the hops); a big one costs 2(p-1)/p n/B plus
// a little pipeline fill and the write of the last 1 MiB chunk.
TEST(Collective, LatencyAndBandwidthTermsFollowTheFormulas) {
  auto s = make_system("v3-8");
  const std::vector<uint32_t> ring = {0, 2, 6, 4};
  const auto tiny = run_collective(*s, C::ALL_REDUCE, C::RING, 4, ring);
  // 470 cycles of HBM latency, + 6 hops x 940 cycles, + 6 x 4 bytes at 106.4 bytes/cycle,
  // + 3 one-element adds, + 470 cycles of HBM latency for the write of the last value.
  EXPECT_EQ(tiny.run.cycles(), 6581u);
  const uint64_t n = 16 << 20;  // 64 MiB
  const auto big = run_collective(*s, C::ALL_REDUCE, C::RING, n, ring, 1 << 20);
  const double seconds = static_cast<double>(big.run.cycles()) / 940e6;
  const double bandwidth = 2.0 * 3 / 4 * n * 4 / 100e9;
  EXPECT_GT(seconds, bandwidth);  // no faster than the links allow
  EXPECT_LT(seconds, bandwidth * 1.01 + 6e-6);
  // The last chunk's write: 470 cycles of latency + 1 MiB at 957.4 bytes/cycle = 1566 cycles.
  EXPECT_EQ(big.run.cycles(), 949211u);
}

// Whatever the algorithm and size, no all-reduce finishes before its busiest link could carry
// the bytes the plan puts on it, and big ones come within 1% of that floor: torus2d too, whose
// rows carry both its first and its last phase, because its phases pipeline range by range (a
// barrier between them left the rows idle while the columns ran, 7% above the floor). The
// every-dimension torus halves the links' load here, and HBM bounds it instead: each phase
// writes what it made final and the next reads it back, 2 cores to a chip's 900 GB/s.
TEST(Collective, NoScheduleBeatsTheLinks) {
  auto s = make_system("v3-8");
  s->set_timing_only(true);
  const Topology t(s->slice());
  for (C::Algorithm a : {C::RING, C::BIDIR_RING, C::TORUS_2D, C::TORUS}) {
    for (uint64_t n : {256ull, 1ull << 18, 1ull << 22, 1ull << 26}) {
      const uint64_t cycles = run_collective(*s, C::ALL_REDUCE, a, n, {}, 1 << 20).run.cycles();
      isa::Collective c;
      c.set_kind(C::ALL_REDUCE);
      c.set_algorithm(a);
      c.set_elements(n);
      const double floor = link_floor_seconds(t, plan_collective(c, t.snake_ring(), t)) * 940e6;
      EXPECT_GE(static_cast<double>(cycles), floor) << "algorithm " << a << " elements " << n;
      if (n == 1ull << 26) {
        EXPECT_LT(static_cast<double>(cycles), floor * (a == C::TORUS ? 1.25 : 1.01)) << a;
      }
    }
  }
}

// Cores 0 and 2 (core 0 of chips 0 and 1) all-reduce over chip 0's +x link and, back, chip 1's
// +x link (round the 2-chip ring). Cores 1 and 3 do the same at the same time over the same two
// links: both take about twice as long as one alone.
TEST(Collective, CollectivesSharingLinksShareTheirBandwidth) {
  auto s = make_system("v3-8");
  const uint64_t n = 4 << 20;
  const uint64_t alone = run_collective(*s, C::ALL_REDUCE, C::RING, n, {0, 2}).run.cycles();
  // Both groups in one program.
  const uint32_t per_chip = 2;
  isa::Program p;
  for (uint32_t core : {0u, 1u, 2u, 3u}) {
    CoreBuilder b(&p, core);
    auto* c =
        b.collective(C::ALL_REDUCE, C::RING, base_of(*s, core) + kSrc, base_of(*s, core) + kDst, n)
            .instruction()
            .mutable_collective();
    c->add_group(core % per_chip);
    c->add_group(core % per_chip + 2);
    b.halt();
  }
  auto both = s->run(p);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_GT(both->cycles(), alone * 19 / 10);
  EXPECT_LT(both->cycles(), alone * 21 / 10);
}

TEST(Collective, MembersThatDisagreeStopTheRunNamingBoth) {
  auto s = make_system("v3-8");
  isa::Program p;
  for (uint32_t core : {0u, 1u}) {
    CoreBuilder b(&p, core);
    auto* c = b.collective(C::ALL_REDUCE, C::RING, base_of(*s, core) + kSrc,
                           base_of(*s, core) + kDst, core == 0 ? 64 : 32)
                  .instruction()
                  .mutable_collective();
    c->add_group(0);
    c->add_group(1);
    b.halt();
  }
  auto run = s->run(p);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("core 1 instruction 0 (all_reduce, 32 elements, ring) does not match its "
                        "group's collective #0 as core 0 instruction 0 issued it (all_reduce, 64 "
                        "elements, ring)"));
}

// Core 1 first waits for an infeed batch the host never sends, so it never issues its part: the
// run ends with a diagnosis that names whom core 0 waits for.
TEST(Collective, AMemberThatNeverIssuesIsDiagnosed) {
  auto s = make_system("v3-8");
  isa::Program p;
  for (uint32_t core : {0u, 1u}) {
    CoreBuilder b(&p, core);
    const uint32_t batch = b.new_flag();
    if (core == 1) b.infeed(block(0, 1, 128, isa::F32)).signal(batch);
    auto ref = b.collective(C::ALL_REDUCE, C::RING, base_of(*s, core) + kSrc,
                            base_of(*s, core) + kDst, 64);
    ref.instruction().mutable_collective()->add_group(0);
    ref.instruction().mutable_collective()->add_group(1);
    if (core == 1) ref.wait(batch, 1);
    b.halt();
  }
  auto run = s->run(p);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("waits for core(s) 1 to issue collective #0 (all_reduce over 2 cores)"));
}

// A line of 4 chips is one grid row of 8 cores: torus2d's columns have one member each and move
// nothing, so the rows' all-gather starts from what their reduce-scatter wrote, range by range.
// The sums are the ring all-reduce's over the same order; the time is the ring's plus, for the
// data every member sends on, one write to HBM and one read back.
TEST(Collective, Torus2dOnALineGathersWhatItsRowsReduced) {
  auto board = config::load_slice("v3-8");
  ASSERT_TRUE(board.ok()) << board.status();
  auto line = std::make_shared<config::SliceSpec>(**board);
  line->topology.shape = {4};
  auto system = System::create(line, {});
  ASSERT_TRUE(system.ok()) << system.status();
  System& s = **system;
  const Topology t(s.slice());
  ASSERT_EQ(t.grid_y(), 1u);
  const uint64_t n = 1001;  // uneven segments in 256-byte chunks that straddle them
  const auto ring = run_collective(s, C::ALL_REDUCE, C::RING, n, {}, 256);
  const auto torus = run_collective(s, C::ALL_REDUCE, C::TORUS_2D, n, {}, 256);
  expect_all_equal(ring, ring_all_reduce(numbers(t.snake_ring()), n));
  expect_all_equal(torus, ring_all_reduce(numbers(t.snake_ring()), n));
  EXPECT_EQ(ring.run.cycles(), 8226u);
  EXPECT_EQ(torus.run.cycles(), 9182u);
  EXPECT_GE(torus.run.cycles() - ring.run.cycles(), 2 * 470u);  // HBM latency: 500 ns each way
}

}  // namespace collective_test
}  // namespace tpusim::sim
