// The tpusim compiler's all-reduce combining (allreduce_combiner.h) without running: which
// cross_replica_sums share an all-reduce, where the group runs, and the combined collective the
// step emits.
#include "runtime/backend/tpusim/allreduce_combiner.h"

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/schedule.h"
#include "sim/isa/dump.h"
#include "sim/isa/validator.h"
#include "tests/runtime/cross_shard_steps.h"

namespace tpusim::runtime::tpusim_backend {
namespace allreduce_combiner_test {

using runtime::testing::three_layer_step;

constexpr uint64_t kMiB = 1 << 20;

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

std::vector<int> sums_of(const Graph& g) {
  std::vector<int> sums;
  for (int id = 0; id < g.size(); ++id) {
    if (g.node(id).op == Op::kCrossReplicaSum) sums.push_back(id);
  }
  return sums;
}

uint64_t bytes_of(const Graph& g, int id) {
  return static_cast<uint64_t>(g.node(id).shape.elements()) * 4;
}

CombinedAllReduces combine(const Graph& g, bool hoisted, uint64_t threshold, uint32_t count = 256) {
  return CombinedAllReduces(g, {}, hoisted, {threshold, count});
}

// The sums in the order they run (after their gradients, the backward pass's order), greedily
// packed: each group is consecutive in that order, within the threshold, and the next sum would
// not have fitted. The root is the last member: the one whose gradient is computed last.
TEST(AllReduceCombiner, PacksTheSumsInTheOrderTheyRunWithinTheThreshold) {
  const Graph g = three_layer_step();
  std::vector<int> sums = sums_of(g);
  ASSERT_EQ(sums.size(), 6u);
  std::stable_sort(sums.begin(), sums.end(),
                   [&](int a, int b) { return g.node(a).inputs[0] < g.node(b).inputs[0]; });
  EXPECT_EQ(combine(g, true, 0).groups(), 0u);
  for (uint64_t threshold :
       {uint64_t{1024}, uint64_t{140000}, uint64_t{600000}, uint64_t{1100000}, 64 * kMiB}) {
    const CombinedAllReduces c = combine(g, true, threshold);
    size_t i = 0, grouped = 0, groups = 0;
    while (i < sums.size()) {
      const int root = c.root(sums[i]) >= 0 ? c.root(sums[i]) : sums[i];
      const std::vector<int> members = c.members(root);
      ASSERT_EQ(members.back(), root);
      uint64_t bytes = 0;
      for (size_t m = 0; m < members.size(); ++m) {
        ASSERT_LT(i + m, sums.size());
        EXPECT_EQ(members[m], sums[i + m]) << "threshold " << threshold;
        bytes += bytes_of(g, members[m]);
      }
      if (members.size() > 1) {
        EXPECT_LE(bytes, threshold);
        grouped += members.size();
        ++groups;
      }
      i += members.size();
      if (i < sums.size()) {
        EXPECT_GT(bytes + bytes_of(g, sums[i]), threshold);
      }
    }
    EXPECT_EQ(c.sums(), grouped);
    EXPECT_EQ(c.groups(), groups);
  }
  // Everything in one: the step's 1.13 MiB of gradients.
  const CombinedAllReduces all = combine(g, true, 64 * kMiB);
  EXPECT_EQ(all.groups(), 1u);
  EXPECT_EQ(all.members(sums.back()), sums);
  // The count limit splits what the bytes would not.
  EXPECT_EQ(combine(g, true, 64 * kMiB, 4).groups(), 2u);
  // In graph order (no overlap) the root is the sum last in graph order.
  const CombinedAllReduces serial = combine(g, false, 64 * kMiB);
  EXPECT_EQ(serial.groups(), 1u);
  EXPECT_EQ(serial.members(sums_of(g).back()), sums_of(g));
}

// s2 sums a value computed from s1's result: it cannot share s1's all-reduce (that could never
// start), whatever the threshold; s4, independent of both, shares s2's.
TEST(AllReduceCombiner, NeverGroupsASumWithOneWhoseResultItNeeds) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {64});
  const Value s1 = b.cross_replica_sum(a);
  const Value s2 = b.cross_replica_sum(s1 * 2.0f + a);
  const Value s4 = b.cross_replica_sum(a * 3.0f);
  b.output("s2", s2);
  b.output("s4", s4);
  ASSERT_TRUE(b.status().ok()) << b.status();
  for (bool hoisted : {true, false}) {
    const CombinedAllReduces c = combine(b.graph(), hoisted, 64 * kMiB);
    EXPECT_EQ(c.groups(), 1u) << hoisted;
    EXPECT_EQ(c.root(s1.id), -1) << hoisted;
    EXPECT_EQ(c.root(s2.id), s4.id) << hoisted;
    EXPECT_EQ(c.members(s4.id), (std::vector<int>{s2.id, s4.id})) << hoisted;
  }
}

// A sum of another sum's result keeps an all-reduce of its own, and so does the sum it reads.
TEST(AllReduceCombiner, SumsOfSumsRunAlone) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {64});
  const Value s1 = b.cross_replica_sum(a);
  const Value s3 = b.cross_replica_sum(s1);
  const Value s5 = b.cross_replica_sum(a * 4.0f);
  const Value s6 = b.cross_replica_sum(a * 5.0f);
  b.output("s3", s3);
  b.output("s5", s5);
  b.output("s6", s6);
  ASSERT_TRUE(b.status().ok()) << b.status();
  const CombinedAllReduces c = combine(b.graph(), true, 64 * kMiB);
  EXPECT_EQ(c.root(s1.id), -1);
  EXPECT_EQ(c.root(s3.id), -1);
  EXPECT_EQ(c.members(s6.id), (std::vector<int>{s5.id, s6.id}));
}

// Every node of `order` comes after the nodes it reads, and every node is in it once.
void expect_valid_order(const Graph& g, const std::vector<int>& order) {
  ASSERT_EQ(order.size(), static_cast<size_t>(g.size()));
  std::vector<int> at(order.size(), -1);
  for (size_t p = 0; p < order.size(); ++p) at[static_cast<size_t>(order[p])] = static_cast<int>(p);
  for (int id = 0; id < g.size(); ++id) {
    ASSERT_GE(at[static_cast<size_t>(id)], 0) << "node %" << id << " not emitted";
    for (int in : g.node(id).inputs)
      EXPECT_LT(at[static_cast<size_t>(in)], at[static_cast<size_t>(id)]) << "node %" << id;
  }
}

// An infeed declared after some computation is still landed before it (the step lands every
// infeed first): the sum of the late infeed runs before the sum of the computed value, and
// their group runs where the computed value's sum would, after the value.
TEST(AllReduceCombiner, TakesTheSumsInEmissionOrderWithTheInfeedsFirst) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {64});
  const Value x = a * 2.0f;
  const Value late = b.infeed("late", DType::kF32, {64});
  const Value s1 = b.cross_replica_sum(x);
  const Value s2 = b.cross_replica_sum(late);
  b.output("s1", s1);
  b.output("s2", s2);
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Graph& g = b.graph();
  for (bool hoisted : {true, false}) {
    const CombinedAllReduces c = combine(g, hoisted, 64 * kMiB);
    const std::vector<int> want =
        hoisted ? std::vector<int>{s2.id, s1.id} : std::vector<int>{s1.id, s2.id};
    EXPECT_EQ(c.members(want.back()), want) << hoisted;
    expect_valid_order(g, emission_order(g, hoisted, &c));
  }
}

// A group's members are emitted together right before its root, every node after what it reads.
TEST(AllReduceCombiner, AGroupRunsWhereItsLastMemberWould) {
  const Graph g = three_layer_step();
  for (bool hoisted : {true, false}) {
    const CombinedAllReduces c = combine(g, hoisted, 600000);
    ASSERT_GE(c.groups(), 1u);
    const std::vector<int> order = emission_order(g, hoisted, &c);
    expect_valid_order(g, order);
    std::vector<int> at(order.size(), -1);
    for (size_t p = 0; p < order.size(); ++p)
      at[static_cast<size_t>(order[p])] = static_cast<int>(p);
    for (int s : sums_of(g)) {
      if (c.root(s) != s) continue;
      const std::vector<int> members = c.members(s);
      for (size_t m = 0; m < members.size(); ++m) {
        EXPECT_EQ(at[static_cast<size_t>(members[m])],
                  at[static_cast<size_t>(s)] - static_cast<int>(members.size() - 1 - m));
      }
      if (hoisted) {  // right after the last gradient
        EXPECT_EQ(at[static_cast<size_t>(s)] - static_cast<int>(members.size()),
                  at[static_cast<size_t>(g.node(s).inputs[0])]);
      }
    }
  }
}

// All six gradients in one all-reduce: one collective instruction whose parts are each
// gradient's buffer and its sum's, on every core; the program is valid with and without
// overlap.
TEST(AllReduceCombiner, TheStepEmitsOneAllReduceOverEveryGradient) {
  const Graph g = three_layer_step();
  for (bool overlap : {true, false}) {
    StepOptions o;
    o.replicas = 8;
    o.overlap_allreduce = overlap;
    o.combine.threshold_bytes = 64 * kMiB;
    isa::Program program;
    for (uint32_t core = 0; core < 8; ++core) {
      auto step = compile_graph(g, v3_8(), core, o);
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_EQ(step->combined_allreduces, 1u);
      EXPECT_EQ(step->combined_sums, 6u);
      *program.add_cores() = step->program->cores(0);
      if (core != 0) continue;
      std::vector<const isa::Collective*> collectives;
      for (const isa::Instruction& in : step->program->cores(0).instructions()) {
        if (in.has_collective()) collectives.push_back(&in.collective());
      }
      ASSERT_EQ(collectives.size(), 1u);
      const isa::Collective& c = *collectives[0];
      ASSERT_EQ(c.parts_size(), 6);
      std::vector<int> sums = sums_of(g);
      uint64_t elements = 0;
      for (const isa::CollectivePart& p : c.parts()) {
        const auto it = std::find_if(sums.begin(), sums.end(), [&](int s) {
          return step->plan.address[static_cast<size_t>(s)] == p.dst();
        });
        ASSERT_NE(it, sums.end()) << "a part's dst is no sum's buffer";
        EXPECT_EQ(p.src(), step->plan.address[static_cast<size_t>(g.node(*it).inputs[0])]);
        EXPECT_EQ(p.elements(), static_cast<uint64_t>(g.node(*it).shape.elements()));
        elements += p.elements();
        sums.erase(it);
      }
      EXPECT_EQ(c.elements(), elements);
    }
    const absl::Status valid = sim::validate_program(program, v3_8());
    EXPECT_TRUE(valid.ok()) << valid;
    // The dump lists the parts: "<total> f32 in 6 parts ring: <n> hbm[src] -> hbm[dst]; ...".
    EXPECT_NE(sim::dump_program(program).find("f32 in 6 parts ring: "), std::string::npos);
  }
}

}  // namespace allreduce_combiner_test
}  // namespace tpusim::runtime::tpusim_backend
