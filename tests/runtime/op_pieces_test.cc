// Every graph op has every piece docs/runtime.md "Adding an op" lists: a row of op_list.h (its
// name and class), a tpusim lowering rule, and an opcheck case whose graph holds it, forward or
// in its gradient, so that the cpu and tpusim backends (TpusimBackend.EveryOpCaseMatchesTheCpu
// Reference), the gpu backend's kernels on the host (GpuPlan.EveryOpcheckCaseOnTheHostMatchesThe
// CpuBackend) and the gradient (Autodiff's finite differences) are run on it. A missing piece is
// named with the file it goes in.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/backend/tpusim/lowering.h"
#include "runtime/graph/graph.h"
#include "runtime/opcheck/cases.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime {
namespace op_pieces_test {

TEST(Ops, TheTableHoldsEveryOpOnceInEnumOrderWithADistinctName) {
  std::set<std::string> names;
  for (size_t i = 0; i < op_table().size(); ++i) {
    const OpInfo& info = op_table()[i];
    EXPECT_EQ(static_cast<size_t>(info.op), i) << info.name;
    EXPECT_STREQ(op_name(info.op), info.name);
    EXPECT_TRUE(names.insert(info.name).second) << "two ops are called " << info.name;
  }
  EXPECT_EQ(op_table().back().op, Op::kCrossReplicaSum);
}

// Ops whose meaning opcheck's one-replica cases cannot show, and the tests that run them on every
// backend instead.
const std::map<Op, std::string> kCheckedElsewhere = {
    {Op::kCrossReplicaSum,
     "CrossShard.CrossReplicaSumAddsInRingOrder (cpu), InfeedSystem/CrossShardTraining.* (tpusim "
     "against the cpu), GpuBackend.ReplicasSumInRingOrder (gpu)"}};

TEST(Ops, EveryOpHasALoweringAndAnOpcheckCase) {
  // The ops each case's graph holds, forward and backward.
  std::map<Op, std::string> checked_by;
  for (const opcheck::OpCase& c : opcheck::all_cases()) {
    auto graph = opcheck::build_case_graph(c, 1);
    ASSERT_TRUE(graph.ok()) << c.op << ": " << graph.status();
    for (const Node& n : graph->nodes()) checked_by.emplace(n.op, c.op);
  }
  for (const OpInfo& info : op_table()) {
    EXPECT_NE(tpusim_backend::lowering_rule(info.op), nullptr)
        << "op '" << info.name << "' has no tpusim lowering rule "
        << "(runtime/backend/tpusim/lowering_rules.cc)";
    EXPECT_TRUE(checked_by.count(info.op) > 0 || kCheckedElsewhere.count(info.op) > 0)
        << "op '" << info.name << "' is in no opcheck case's graph (runtime/opcheck/cases*.cc): "
        << "no backend's kernel or gradient for it is checked";
  }
}

}  // namespace op_pieces_test
}  // namespace tpusim::runtime
