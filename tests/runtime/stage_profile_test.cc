// The stage profile: CPU time charged to the stage that spent it, nested regions counted once
// (self time), on whichever thread the work ran.
#include "runtime/data/stage_profile.h"

#include <gtest/gtest.h>

namespace tpusim::runtime::data {
namespace stage_profile_test {

// Burns `ns` of this thread's CPU time.
void burn(uint64_t ns) {
  const uint64_t until = thread_cpu_ns() + ns;
  volatile uint64_t spin = 0;
  while (thread_cpu_ns() < until) spin = spin + 1;
}

const StageSample& stage(const std::vector<StageSample>& s, const std::string& name) {
  for (const auto& x : s) {
    if (x.name == name) return x;
  }
  static StageSample none;
  return none;
}

// "batch" pulls "decode" (sequential map) through its chain; decode's 1 ms per element is charged
// to decode only, and batch gets what is left (stacking), far less.
TEST(StageProfile, NestedStagesAreChargedTheirSelfTime) {
  auto profile = std::make_shared<StageProfile>();
  auto slow = [](Element e) -> absl::StatusOr<Element> {
    burn(1'000'000);
    return e;
  };
  auto ds = Dataset::range(8)
                ->profiled(profile, "read")
                ->map(profile->timed("decode", slow))
                ->batch(4)
                ->profiled(profile, "batch");
  auto all = collect(*ds);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  const auto s = profile->snapshot();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "read");
  EXPECT_EQ(stage(s, "decode").elements, 8u);
  EXPECT_EQ(stage(s, "read").elements, 8u);
  EXPECT_EQ(stage(s, "batch").elements, 2u);
  EXPECT_GE(stage(s, "decode").cpu_seconds, 8e-3);
  EXPECT_LT(stage(s, "batch").cpu_seconds, stage(s, "decode").cpu_seconds / 4);
  EXPECT_LT(stage(s, "read").cpu_seconds, stage(s, "decode").cpu_seconds / 4);
}

// On 3 worker threads each element still costs its 1 ms of CPU: 12 elements, >= 12 ms in all.
TEST(StageProfile, WorkOnMapThreadsIsCounted) {
  auto profile = std::make_shared<StageProfile>();
  auto slow = [](Element e) -> absl::StatusOr<Element> {
    burn(1'000'000);
    return e;
  };
  auto ds = Dataset::range(12)->map(profile->timed("decode", slow, 3), 3);
  auto all = collect(*ds);
  ASSERT_TRUE(all.ok());
  const auto s = profile->snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].threads, 3);
  EXPECT_EQ(s[0].elements, 12u);
  EXPECT_GE(s[0].cpu_seconds, 12e-3);
}

// A batch with a profile charges each batch's assembly to its stage, with its threads, on the
// consumer's thread or on its workers: the stacking of 1 MB a batch is counted, the decode
// under it is not. Decode burns 10 ms of CPU an element so that its 160 ms stay above the
// stacking's CPU even under ThreadSanitizer, which slows the copies (not the burn) ~10x.
TEST(StageProfile, BatchAssemblyIsChargedToItsStageOnWhicheverThread) {
  auto big = [](Element e) -> absl::StatusOr<Element> {
    burn(10'000'000);
    e["pixels"] = image_value(std::vector<float>(1 << 16, 1.0F), 256, 256, 1);
    return e;
  };
  for (int threads : {1, 3}) {
    auto profile = std::make_shared<StageProfile>();
    BatchOptions o;
    o.num_parallel_calls = threads;
    o.profile = profile;
    auto ds = Dataset::range(16)->map(profile->timed("decode", big))->batch(4, o);
    auto all = collect(*ds);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 4u);
    const auto s = profile->snapshot();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[1].name, "batch");
    EXPECT_EQ(s[1].threads, threads);
    EXPECT_EQ(s[1].elements, 4u);
    EXPECT_GT(s[1].cpu_seconds, 0.0);
    EXPECT_EQ(stage(s, "decode").elements, 16u);
    EXPECT_GE(stage(s, "decode").cpu_seconds, 160e-3);
    EXPECT_LT(s[1].cpu_seconds, stage(s, "decode").cpu_seconds);
  }
}

TEST(StageProfile, DeclaringAStageAgainKeepsIt) {
  StageProfile p;
  EXPECT_EQ(p.declare("read", 2), 0u);
  EXPECT_EQ(p.declare("map", 4), 1u);
  EXPECT_EQ(p.declare("read", 7), 0u);
  p.add(0, 1500, 3);
  const auto s = p.snapshot();
  EXPECT_EQ(s[0].threads, 2);
  EXPECT_DOUBLE_EQ(s[0].cpu_seconds, 1.5e-6);
  EXPECT_EQ(s[0].elements, 3u);
}

}  // namespace stage_profile_test
}  // namespace tpusim::runtime::data
