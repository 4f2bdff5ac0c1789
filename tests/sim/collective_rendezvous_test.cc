// The collectives' rendezvous without a simulator: a collective starts when the last member of
// its group issues it, a core's k-th collective meets its peers' k-th, mismatches and permutes
// that send two members' data to one core are refused, and the waiting members say whom they
// wait for.
#include "sim/net/collective_rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "tests/sim/core_ids.h"

namespace tpusim::sim {
namespace collective_rendezvous_test {

using ::testing::HasSubstr;
using C = isa::Collective;

const Topology& v3_8() {
  static const Topology topology = [] {
    auto slice = config::load_slice("v3-8");
    EXPECT_TRUE(slice.ok()) << slice.status();
    return Topology(**slice);
  }();
  return topology;
}

C collective(C::Kind kind, std::vector<uint32_t> group, uint64_t elements = 64) {
  C c;
  c.set_kind(kind);
  c.set_algorithm(kind == C::PERMUTE ? C::ALGORITHM_UNSPECIFIED : C::RING);
  c.set_elements(elements);
  for (uint32_t core : group) c.add_group(core);
  return c;
}

TEST(CollectiveRendezvous, StartsWhenTheLastMemberIssues) {
  CollectiveRendezvous r(v3_8(), 8);
  const C c = collective(C::ALL_REDUCE, {0, 1, 2});
  std::string error;
  EXPECT_EQ(r.arrive(CoreId{0}, c, 4, true, &error), nullptr);
  EXPECT_EQ(r.waiting_for(CoreId{0}),
            "waits for core(s) 1, 2 to issue collective #0 (all_reduce over 3 cores)");
  EXPECT_EQ(r.waiting_for(CoreId{5}), "");  // issued nothing
  EXPECT_EQ(r.arrive(CoreId{2}, c, 7, true, &error), nullptr);
  EXPECT_EQ(r.waiting_for(CoreId{2}),
            "waits for core(s) 1 to issue collective #0 (all_reduce over 3 cores)");
  const CollectiveGroup* g = r.arrive(CoreId{1}, c, 3, false, &error);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(error, "");
  EXPECT_TRUE(g->complete());
  EXPECT_EQ(g->cores, cores({0, 1, 2}));
  EXPECT_EQ(g->arrived, cores({0, 2, 1}));
  EXPECT_EQ(g->number, 0u);
  EXPECT_EQ(g->first_issue, "core 0 instruction 4");
  EXPECT_FALSE(g->functional);  // one member runs timing only
  EXPECT_EQ(g->src.size(), 3u);
  EXPECT_EQ(g->dst.size(), 3u);
  for (uint32_t core : {0, 1, 2}) EXPECT_EQ(r.waiting_for(CoreId{core}), "") << core;
}

// Core 0 issues two collectives over {0, 1} before core 1 issues any: core 1's first meets
// core 0's first, its second the second, each starting when core 1 reaches it.
TEST(CollectiveRendezvous, ACoresKthCollectiveMeetsItsPeersKth) {
  CollectiveRendezvous r(v3_8(), 8);
  const C small = collective(C::ALL_REDUCE, {0, 1}, 16), big = collective(C::ALL_REDUCE, {0, 1});
  std::string error;
  EXPECT_EQ(r.arrive(CoreId{0}, small, 0, true, &error), nullptr);
  EXPECT_EQ(r.arrive(CoreId{0}, big, 1, true, &error), nullptr);
  EXPECT_THAT(r.waiting_for(CoreId{0}), HasSubstr("collective #1"));
  const CollectiveGroup* first = r.arrive(CoreId{1}, small, 0, true, &error);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->number, 0u);
  EXPECT_EQ(first->c.elements(), 16u);
  const CollectiveGroup* second = r.arrive(CoreId{1}, big, 1, true, &error);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->number, 1u);
  EXPECT_EQ(first->number, 0u);  // still valid
  EXPECT_EQ(error, "");
}

// A core's collectives over different groups are counted together: core 1's first collective
// is over {1, 2}, so its second, over {0, 1}, is collective #1 and meets core 0's second.
TEST(CollectiveRendezvous, GroupsAreMatchedByTheMembersCountAndTheGroup) {
  CollectiveRendezvous r(v3_8(), 8);
  std::string error;
  EXPECT_EQ(r.arrive(CoreId{1}, collective(C::ALL_REDUCE, {1, 2}), 0, true, &error), nullptr);
  EXPECT_EQ(r.arrive(CoreId{0}, collective(C::ALL_REDUCE, {0, 3}), 0, true, &error), nullptr);
  EXPECT_EQ(r.arrive(CoreId{1}, collective(C::ALL_REDUCE, {0, 1}), 1, true, &error), nullptr);
  const CollectiveGroup* g =
      r.arrive(CoreId{0}, collective(C::ALL_REDUCE, {0, 1}), 1, true, &error);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->number, 1u);
  EXPECT_EQ(r.waiting_for(CoreId{0}), "");
  EXPECT_EQ(r.waiting_for(CoreId{1}), "");
  EXPECT_EQ(r.waiting_for(CoreId{3}), "");  // core 3 issued nothing; core 0's group {0, 3} waits
}

TEST(CollectiveRendezvous, AMismatchNamesBothIssues) {
  CollectiveRendezvous r(v3_8(), 8);
  std::string error;
  EXPECT_EQ(r.arrive(CoreId{0}, collective(C::ALL_REDUCE, {0, 1}, 64), 2, true, &error), nullptr);
  EXPECT_EQ(r.arrive(CoreId{1}, collective(C::ALL_REDUCE, {0, 1}, 32), 5, true, &error), nullptr);
  EXPECT_EQ(error,
            "core 1 instruction 5 (all_reduce, 32 elements, ring) does not match its group's "
            "collective #0 as core 0 instruction 2 issued it (all_reduce, 64 elements, ring)");
  // The mismatching member has not joined: the group still waits for it.
  EXPECT_THAT(r.waiting_for(CoreId{0}), HasSubstr("waits for core(s) 1 "));
}

TEST(CollectiveRendezvous, APermuteThatSendsTwoMembersDataToOneCoreIsRefused) {
  CollectiveRendezvous r(v3_8(), 8);
  std::string error;
  const CollectiveGroup* g = nullptr;
  for (uint32_t core : {0, 1, 2}) {
    C c = collective(C::PERMUTE, {0, 1, 2});
    c.set_peer(core == 0 ? 1 : 2);
    g = r.arrive(CoreId{core}, c, 0, true, &error);
  }
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->peers, cores({1, 2, 2}));
  EXPECT_EQ(duplicate_peers(*g),
            "collective #0 (permute over cores 0, 1, 2, first issued by core 0 instruction 0): "
            "peers 1, 2, 2 send two members' data to one core");
}

TEST(CollectiveRendezvous, BeginRunForgetsEveryGroup) {
  CollectiveRendezvous r(v3_8(), 8);
  std::string error;
  EXPECT_EQ(r.arrive(CoreId{0}, collective(C::ALL_REDUCE, {0, 1}), 0, true, &error), nullptr);
  r.begin_run();
  EXPECT_EQ(r.waiting_for(CoreId{0}), "");
  // Core 1's first collective of the new run waits for core 0's first of the new run.
  EXPECT_EQ(r.arrive(CoreId{1}, collective(C::ALL_REDUCE, {0, 1}), 0, true, &error), nullptr);
  const CollectiveGroup* g =
      r.arrive(CoreId{0}, collective(C::ALL_REDUCE, {0, 1}), 0, true, &error);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->number, 0u);
  EXPECT_EQ(g->first_issue, "core 1 instruction 0");
}

TEST(CollectiveRendezvous, CoreListsNameEightCoresAndCountTheRest) {
  EXPECT_EQ(core_list(cores({3, 1})), "3, 1");
  EXPECT_EQ(core_list(cores({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})),
            "0, 1, 2, 3, 4, 5, 6, 7 and 3 more");
}

}  // namespace collective_rendezvous_test
}  // namespace tpusim::sim
