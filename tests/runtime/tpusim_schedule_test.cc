// The tpusim compiler's overlapped all-reduce without running: the emission order that moves
// each gradient's all-reduce up to the gradient, the HBM plan that keeps what a running
// collective touches, and the flags that hold up only the fragments that touch its buffers.
#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/schedule.h"
#include "sim/isa/validator.h"
#include "tests/runtime/cross_shard_steps.h"

namespace tpusim::runtime::tpusim_backend {
namespace tpusim_schedule_test {

constexpr uint32_t kReplicas = 8;  // the cores of a v3-8
using runtime::testing::three_layer_step;

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

std::vector<int> positions(const std::vector<int>& order) {
  std::vector<int> at(order.size(), -1);
  for (size_t p = 0; p < order.size(); ++p) at[static_cast<size_t>(order[p])] = static_cast<int>(p);
  return at;
}

TEST(Schedule, EachAllReduceFollowsTheGradientItSums) {
  const Graph g = three_layer_step();
  std::vector<int> graph_order(static_cast<size_t>(g.size()));
  for (int id = 0; id < g.size(); ++id) graph_order[static_cast<size_t>(id)] = id;
  EXPECT_EQ(emission_order(g, false), graph_order);

  const std::vector<int> order = emission_order(g, true);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted, graph_order);  // every node once
  const std::vector<int> at = positions(order);
  // cross_shard_gradients appends the sums after every gradient: the forward and backward pass
  // are the nodes before the first sum.
  int first_sum = 0;
  while (g.node(first_sum).op != Op::kCrossReplicaSum) ++first_sum;
  int last_backward = 0;  // emission position of the pass's last fragment
  for (int id = 0; id < first_sum; ++id)
    last_backward = std::max(last_backward, at[static_cast<size_t>(id)]);
  int collectives = 0, hoisted = 0;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    for (int in : n.inputs) EXPECT_LT(at[static_cast<size_t>(in)], at[static_cast<size_t>(id)]);
    if (n.op != Op::kCrossReplicaSum) continue;
    ++collectives;
    EXPECT_EQ(at[static_cast<size_t>(id)], at[static_cast<size_t>(n.inputs[0])] + 1)
        << "cross_replica_sum %" << id;
    if (at[static_cast<size_t>(id)] < last_backward) ++hoisted;
  }
  // Every sum but the last-computed gradient's runs ahead of backward-pass work.
  EXPECT_EQ(collectives, 6);
  EXPECT_EQ(hoisted, 5);
}

TEST(Schedule, AFragmentWaitsOnlyForTheCollectivesWhoseBuffersItTouches) {
  CollectivesInFlight in_flight;
  EXPECT_EQ(in_flight.latest(), 0u);
  // Collective 1 sums [0, 100) into [100, 200); collective 2 sums [200, 300) into [300, 400).
  in_flight.started(1, {{0, 100}}, {{100, 200}});
  in_flight.started(2, {{200, 300}}, {{300, 400}});
  EXPECT_EQ(in_flight.latest(), 2u);
  EXPECT_EQ(in_flight.needed({{400, 500}}, {{500, 600}}), 0u);  // touches neither
  EXPECT_EQ(in_flight.needed({{0, 100}}, {}), 0u);              // reading what a collective reads
  EXPECT_EQ(in_flight.needed({{150, 151}}, {}), 1u);            // reads collective 1's result
  EXPECT_EQ(in_flight.needed({}, {{99, 101}}), 1u);             // writes over its input and result
  EXPECT_EQ(in_flight.needed({}, {{250, 260}}), 2u);            // writes over collective 2's input
  EXPECT_EQ(in_flight.needed({{150, 160}, {390, 400}}, {}), 2u);  // the later of the two
  // A fragment that waited for collective 1 orders everything after it behind collective 1.
  in_flight.retire(1);
  EXPECT_EQ(in_flight.needed({{150, 151}}, {}), 0u);
  EXPECT_EQ(in_flight.needed({{390, 400}}, {}), 2u);
  in_flight.retire(2);
  EXPECT_EQ(in_flight.latest(), 0u);
}

StepOptions replicated(bool overlap) {
  StepOptions o;
  o.replicas = kReplicas;
  o.overlap_allreduce = overlap;
  return o;
}

// [begin, end) of node `id`'s buffer in the compiled step's plan.
HbmRange buffer_of(const CompiledStep& step, const Graph& g, int id) {
  const uint64_t at = step.plan.address[static_cast<size_t>(id)];
  return {at, at + buffer_bytes(g.node(step.plan.owner[static_cast<size_t>(id)]))};
}

// While an all-reduce runs (from its place in the emission order to its result's last reader),
// no buffer allocated in between lands on the gradient it reads.
TEST(Schedule, TheHbmPlanKeepsARunningAllReducesInput) {
  const Graph g = three_layer_step();
  auto step = compile_graph(g, v3_8(), 0, replicated(true));
  ASSERT_TRUE(step.ok()) << step.status();
  const std::vector<int> order = emission_order(g, true);
  const std::vector<int> at = positions(order);
  int checked = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (g.node(id).op != Op::kCrossReplicaSum) continue;
    const HbmRange src = buffer_of(*step, g, g.node(id).inputs[0]);
    int last_reader = at[static_cast<size_t>(id)];
    for (int r = 0; r < g.size(); ++r) {
      for (int in : g.node(r).inputs)
        if (in == id) last_reader = std::max(last_reader, at[static_cast<size_t>(r)]);
    }
    for (int p = at[static_cast<size_t>(id)] + 1; p <= last_reader; ++p) {
      const int n = order[static_cast<size_t>(p)];
      if (step->plan.owner[static_cast<size_t>(n)] != n) continue;  // an alias: no new buffer
      const Op op = g.node(n).op;
      if (op == Op::kVariable || op == Op::kConstant || op == Op::kInfeed) continue;
      EXPECT_FALSE(buffer_of(*step, g, n).overlaps(src))
          << "node %" << n << " lands on the input of cross_replica_sum %" << id;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// The step lands every infeed before its first fragment, so an infeed that comes late in graph
// order is placed first, and its buffer never takes the place of a value still to be read: here
// x1 would otherwise take x0's buffer once x0's last reader is emitted, and land on it before
// that reader has run.
TEST(Schedule, InfeedsComeFirstAndTheirBuffersAreLiveFromTheStart) {
  GraphBuilder b;
  const Value x0 = b.infeed("x0", DType::kF32, {64, 64});
  b.output("y0", b.unary(Op::kExp, x0));
  const Value x1 = b.infeed("x1", DType::kF32, {64, 64});
  b.output("y1", b.unary(Op::kExp, x1));
  const Graph& g = b.graph();
  const std::vector<int> order = emission_order(g, false);
  ASSERT_EQ(order.size(), static_cast<size_t>(g.size()));
  EXPECT_EQ(order[0], x0.id);
  EXPECT_EQ(order[1], x1.id);
  auto step = compile_graph(g, v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_FALSE(buffer_of(*step, g, x0.id).overlaps(buffer_of(*step, g, x1.id)));
}

// The k-th signal of a flag brings it to k: for each collective, its flag and that count.
struct Signalled {
  int index;
  uint32_t flag;
  uint64_t count;
};

std::vector<Signalled> collectives_of(const isa::CoreProgram& core) {
  std::map<uint32_t, uint64_t> counts;
  std::vector<Signalled> out;
  for (int i = 0; i < core.instructions_size(); ++i) {
    const isa::Instruction& in = core.instructions(i);
    for (uint32_t f : in.signal()) ++counts[f];
    if (in.has_collective()) {
      EXPECT_EQ(in.signal_size(), 1) << "instruction " << i;
      out.push_back({i, in.signal(0), counts[in.signal(0)]});
    }
  }
  return out;
}

bool waits_for(const isa::Instruction& in, const Signalled& c) {
  return std::any_of(in.wait().begin(), in.wait().end(), [&](const isa::Wait& w) {
    return w.flag() == c.flag && w.value() >= c.count;
  });
}

// The compute instructions (not collectives) after collective `c` before the first instruction
// that waits for it.
int computed_before_first_waiter(const isa::CoreProgram& core, const Signalled& c) {
  int computed = 0;
  for (int i = c.index + 1; i < core.instructions_size(); ++i) {
    const isa::Instruction& in = core.instructions(i);
    if (waits_for(in, c)) return computed;
    if (!in.has_collective()) ++computed;
  }
  ADD_FAILURE() << "nothing waits for the collective at instruction " << c.index;
  return -1;
}

// The step of `g` on every core of the v3-8, as the tpusim backend runs it.
isa::Program whole_step(const Graph& g, bool overlap) {
  isa::Program program;
  for (uint32_t core = 0; core < kReplicas; ++core) {
    auto step = compile_graph(g, v3_8(), core, replicated(overlap));
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return program;
    *program.add_cores() = step->program->cores(0);
  }
  return program;
}

// Overlapped, the backward pass goes on after a gradient's all-reduce is issued: the fragments
// of the earlier layers' gradients issue before anything waits for it. Not overlapped, the very
// next instruction waits for it.
TEST(Schedule, AnOverlappedAllReduceHoldsUpOnlyWhatReadsItsResult) {
  const Graph g = three_layer_step();
  const isa::Program overlapped = whole_step(g, true);
  const isa::Program serial = whole_step(g, false);
  for (const isa::Program* p : {&overlapped, &serial}) {
    const absl::Status valid = sim::validate_program(*p, v3_8());
    EXPECT_TRUE(valid.ok()) << valid;
  }
  const isa::CoreProgram& on = overlapped.cores(0);
  const isa::CoreProgram& off = serial.cores(0);
  const std::vector<Signalled> on_collectives = collectives_of(on);
  const std::vector<Signalled> off_collectives = collectives_of(off);
  ASSERT_EQ(on_collectives.size(), 6u);
  ASSERT_EQ(off_collectives.size(), 6u);
  for (const Signalled& c : off_collectives) {
    EXPECT_EQ(c.index + 1,
              std::find_if(off.instructions().begin() + c.index + 1, off.instructions().end(),
                           [&](const isa::Instruction& in) { return waits_for(in, c); }) -
                  off.instructions().begin())
        << "instruction " << c.index;
  }
  // One flag counts the overlapped collectives in order, apart from the fragments' HBM writes.
  for (size_t k = 0; k < on_collectives.size(); ++k) {
    EXPECT_EQ(on_collectives[k].flag, on_collectives[0].flag);
    EXPECT_EQ(on_collectives[k].count, k + 1);
  }
  // Every sum but the last-computed gradient's has backward-pass work after it to hide behind.
  for (size_t k = 0; k + 1 < on_collectives.size(); ++k) {
    EXPECT_GT(computed_before_first_waiter(on, on_collectives[k]), 0) << "collective " << k;
  }
}

}  // namespace tpusim_schedule_test
}  // namespace tpusim::runtime::tpusim_backend
