// Combined all-reduces (Collective.parts, XLA's AllReduceCombiner): several buffers reduced as
// one, scattered over HBM, for one collective's latency. One System per process.
#include <cstring>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "tests/sim/collective_util.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace combined_collective_test {

using testing::base_of;
using testing::chip_of;
using testing::kDst;
using testing::kSrc;
using testing::make_system;
using testing::ring_all_reduce;
using testing::values_of;
using C = isa::Collective;

const std::vector<uint32_t> kRing = {0, 2, 6, 4};  // core 0 of each chip: single ICI hops

// Each member's parts: `sizes` elements each, their srcs and dsts 64 KiB apart (not end to end),
// filled with the member's values_of(total) in order.
std::vector<isa::CollectivePart> parts_of(System& s, uint32_t core,
                                          const std::vector<uint64_t>& sizes) {
  std::vector<isa::CollectivePart> parts;
  uint64_t total = 0;
  for (uint64_t n : sizes) total += n;
  const std::vector<float> values = values_of(core, total);
  uint64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    isa::CollectivePart p;
    p.set_src(base_of(s, core) + kSrc + i * 0x10000);
    p.set_dst(base_of(s, core) + kDst + i * 0x10000);
    p.set_elements(sizes[i]);
    if (!s.options().timing_only) {
      EXPECT_TRUE(s.write_hbm(chip_of(s, core), p.src(), values.data() + at, sizes[i] * 4).ok());
    }
    at += sizes[i];
    parts.push_back(p);
  }
  return parts;
}

// Runs one combined all-reduce of `sizes` over kRing.
absl::StatusOr<RunResult> run_combined(System& s, const std::vector<uint64_t>& sizes) {
  isa::Program p;
  for (uint32_t core : kRing) {
    CoreBuilder b(&p, core);
    auto* c =
        b.combined_all_reduce(C::RING, parts_of(s, core, sizes)).instruction().mutable_collective();
    for (uint32_t g : kRing) c->add_group(g);
    c->set_chunk_bytes(256);
    b.halt();
  }
  return s.run(p);
}

// The parts' sums are the all-reduce of their concatenation, element for element the same bits
// as the host's sum in ring order, each written to its own dst; the bytes around them are not
// touched.
TEST(CombinedCollective, SumsItsPartsAsOneBufferIntoEachDst) {
  auto s = make_system("v3-8");
  const std::vector<uint64_t> sizes = {5, 1000, 3, 64};
  const uint64_t total = 1072;
  const std::vector<float> sentinel(16, 7.0f);
  for (uint32_t core : kRing) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const uint64_t after = base_of(*s, core) + kDst + i * 0x10000 + sizes[i] * 4;
      ASSERT_TRUE(s->write_hbm(chip_of(*s, core), after, sentinel.data(), 64).ok());
    }
  }
  auto run = run_combined(*s, sizes);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<float> want = ring_all_reduce(kRing, total);
  for (uint32_t core : kRing) {
    uint64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<float> got(sizes[i]), after(16);
      const uint64_t dst = base_of(*s, core) + kDst + i * 0x10000;
      ASSERT_TRUE(s->read_hbm(chip_of(*s, core), dst, got.data(), sizes[i] * 4).ok());
      EXPECT_EQ(std::memcmp(got.data(), want.data() + at, sizes[i] * 4), 0)
          << "core " << core << " part " << i;
      ASSERT_TRUE(s->read_hbm(chip_of(*s, core), dst + sizes[i] * 4, after.data(), 64).ok());
      EXPECT_EQ(after, sentinel) << "core " << core << " after part " << i;
      at += sizes[i];
    }
  }
  // Every byte read and written once by each member, as one buffer would be.
  EXPECT_EQ(s->stats().value("interconnect.hbm_bytes"), 4 * 2 * total * 4.0);
}

// Eight gradients of 16 elements: apart, each all-reduce pays the ring's 6 hop latencies and
// both HBM latencies (6583 cycles each, 52664 in all); combined they pay them once, and the run
// takes what one all-reduce of 128 elements takes (6599 cycles).
TEST(CombinedCollective, PaysOneCollectivesLatencyForAllItsParts) {
  auto s = make_system("v3-8");
  s->set_timing_only(true);
  const std::vector<uint64_t> sizes(8, 16);
  auto combined = run_combined(*s, sizes);
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_EQ(s->stats().value("interconnect.collectives"), 1.0);
  const uint64_t one =
      testing::run_collective(*s, C::ALL_REDUCE, C::RING, 128, kRing, 256).run.cycles();
  EXPECT_EQ(combined->cycles(), one);
  // The same eight apart, one after another.
  isa::Program p;
  for (uint32_t core : kRing) {
    CoreBuilder b(&p, core);
    for (const isa::CollectivePart& part : parts_of(*s, core, sizes)) {
      auto* c = b.collective(C::ALL_REDUCE, C::RING, part.src(), part.dst(), part.elements())
                    .instruction()
                    .mutable_collective();
      for (uint32_t g : kRing) c->add_group(g);
    }
    b.halt();
  }
  auto apart = s->run(p);
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ(s->stats().value("interconnect.collectives"), 8.0);
  EXPECT_GT(apart->cycles(), 7 * combined->cycles());
  EXPECT_EQ(combined->cycles(), 6599u);
  EXPECT_EQ(apart->cycles(), 52664u);
}

}  // namespace combined_collective_test
}  // namespace tpusim::sim
