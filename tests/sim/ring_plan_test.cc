// Collective plans without a simulator: torus2d's rows and columns, and the every-dimension torus
// summing every member's value exactly once into every element and giving every link a share.
#include "sim/net/ring_plan.h"

#include <set>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/net/collective_numerics.h"
#include "tests/sim/core_ids.h"

namespace tpusim::sim {
namespace ring_plan_test {

using C = isa::Collective;

std::shared_ptr<const config::SliceSpec> slice(const std::string& name,
                                               std::vector<uint32_t> shape = {}) {
  auto loaded = config::load_slice(name);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  auto s = std::make_shared<config::SliceSpec>(**loaded);
  if (!shape.empty()) {
    s->topology.shape = shape;
    s->chips = 1;
    for (uint32_t n : shape) s->chips *= n;
    s->cores = s->chips * s->chip.tensor_cores;
  }
  return s;
}

isa::Collective all_reduce(C::Algorithm algorithm, uint64_t elements) {
  isa::Collective c;
  c.set_kind(C::ALL_REDUCE);
  c.set_algorithm(algorithm);
  c.set_elements(elements);
  return c;
}

// v3-8's grid is 4 x 2 cores: two rows reduce-scatter the whole buffer, the columns all-reduce
// segment x of it, the rows all-gather.
TEST(RingPlan, Torus2dIsRowsColumnsRows) {
  const Topology t(*slice("v3-8"));
  const CollectivePlan plan = plan_collective(all_reduce(C::TORUS_2D, 1001), t.snake_ring(), t);
  ASSERT_EQ(plan.size(), 3u);
  ASSERT_EQ(plan[0].size(), 2u);
  EXPECT_EQ(plan[0][0].members, cores({0, 1, 2, 3}));
  EXPECT_EQ(plan[0][1].members, cores({4, 5, 6, 7}));
  EXPECT_TRUE(plan[0][0].reduce_scatter);
  EXPECT_FALSE(plan[0][0].all_gather);
  ASSERT_EQ(plan[1].size(), 4u);
  // 1001 = 251 + 250 + 250 + 250: column 1 holds [251, 501).
  EXPECT_EQ(plan[1][1].members, cores({1, 5}));
  EXPECT_EQ(plan[1][1].offset, 251u);
  EXPECT_EQ(plan[1][1].elements, 250u);
  EXPECT_TRUE(plan[1][1].reduce_scatter && plan[1][1].all_gather);
  EXPECT_EQ(plan[2][1].members, cores({4, 5, 6, 7}));
  EXPECT_FALSE(plan[2][1].reduce_scatter);
  EXPECT_EQ(plan[2][1].elements, 1001u);
}

// Member m contributes weight(m) * (i % 7 + 1) to element i, integers a float adds exactly: every
// member of every slice ends with the exact sum in every element, so each value was added once.
// 5 elements leave some of the torus's parts empty.
TEST(RingPlan, TheTorusAddsEveryMembersValueOnceIntoEveryElement) {
  struct Case {
    std::shared_ptr<const config::SliceSpec> spec;
    size_t phases;
  };
  const std::vector<Case> cases = {
      {slice("v3-8"), 3},             // 4 x 2 cores: X', Y
      {slice("v3-32"), 3},            // 8 x 4
      {slice("v4-128"), 5},           // 8 x 4 x 4: X', Y, Z
      {slice("v4-8", {2, 1, 2}), 3},  // 4 x 1 x 2: Y left out
      {slice("v3-8", {4}), 1},        // a line: one ring of 8 cores
  };
  for (const Case& c : cases) {
    const Topology t(*c.spec);
    std::vector<CoreId> members;
    for (uint32_t m = 0; m < t.cores(); ++m) members.push_back(CoreId{m});
    for (uint64_t n : {1001ull, 5ull}) {
      SCOPED_TRACE(c.spec->name + " shape " + std::to_string(c.spec->topology.shape.size()) +
                   "D, " + std::to_string(n) + " elements");
      const isa::Collective op = all_reduce(C::TORUS, n);
      const CollectivePlan plan = plan_collective(op, members, t);
      EXPECT_EQ(plan.size(), c.phases);
      for (auto weight : {+[](uint32_t m) { return m + 1.0f; },
                          +[](uint32_t m) { return (m * m) % 97 + 1.0f; }}) {
        std::vector<std::vector<float>> src(members.size(), std::vector<float>(n));
        double total = 0;
        for (uint32_t m = 0; m < members.size(); ++m) {
          total += weight(m);
          for (uint64_t i = 0; i < n; ++i) src[m][i] = weight(m) * static_cast<float>(i % 7 + 1);
        }
        const auto dst = collective_results(op, members, plan, src, {});
        for (uint32_t m = 0; m < members.size(); ++m) {
          for (uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(dst[m][i], static_cast<float>(total * static_cast<double>(i % 7 + 1)))
                << "member " << m << " element " << i;
          }
        }
      }
    }
  }
}

// The point of the every-dimension torus: on v4-128 its rings use every ICI link of every chip
// (6 of them) and both on-chip links, where torus2d's leave the Z links and every negative link
// idle.
TEST(RingPlan, TheTorusGivesEveryLinkAShare) {
  const Topology t(*slice("v4-128"));
  auto used = [&](C::Algorithm a) {
    std::set<uint32_t> links;
    for (const auto& phase : plan_collective(all_reduce(a, 1 << 20), t.snake_ring(), t)) {
      for (const RingPass& pass : phase) {
        for (uint32_t i = 0; i < pass.size(); ++i) {
          for (uint32_t l :
               t.route(pass.members[i], pass.members[(i + 1) % pass.size()], pass.ties))
            links.insert(l);
        }
      }
    }
    return links.size();
  };
  EXPECT_EQ(t.link_count(), 64u * 6 + 64u * 4);  // 4 core links per chip, 2 of them to itself
  EXPECT_EQ(used(C::TORUS), 64u * 6 + 64u * 2);
  EXPECT_LT(used(C::TORUS_2D), 64u * 4);
}

}  // namespace ring_plan_test
}  // namespace tpusim::sim
