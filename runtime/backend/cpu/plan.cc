#include "runtime/backend/cpu/plan.h"

#include <algorithm>

namespace tpusim::runtime::cpu {
namespace {

// A transpose that swaps the last two axes and keeps the others: what a transposed matmul
// operand reads.
bool swaps_last_two_axes(const Node& n) {
  const auto& perm = n.attrs.axes;
  const auto rank = static_cast<int64_t>(perm.size());
  if (n.op != Op::kTranspose || rank < 2 || n.dtype == DType::kS32) return false;
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (perm[static_cast<size_t>(d)] != d) return false;
  }
  return perm[static_cast<size_t>(rank - 2)] == rank - 1 &&
         perm[static_cast<size_t>(rank - 1)] == rank - 2;
}

// Transposes whose every live reader is a matmul and f32 broadcasts whose every live reader is a
// binary elementwise op, which are no output or update.
std::vector<bool> foldable_nodes(const Graph& graph, const std::vector<bool>& live) {
  std::vector<bool> foldable(static_cast<size_t>(graph.size()), false);
  for (int i = 0; i < graph.size(); ++i) {
    const Node& n = graph.node(i);
    foldable[static_cast<size_t>(i)] =
        swaps_last_two_axes(n) || (n.op == Op::kBroadcast && n.dtype != DType::kS32);
  }
  for (int i = 0; i < graph.size(); ++i) {
    if (!live[static_cast<size_t>(i)]) continue;
    const Op reader = graph.node(i).op;
    for (int in : graph.node(i).inputs) {
      const Op op = graph.node(in).op;
      if ((op == Op::kTranspose && reader != Op::kMatMul) ||
          (op == Op::kBroadcast && !is_binary_elementwise(reader)))
        foldable[static_cast<size_t>(in)] = false;
    }
  }
  for (const auto& o : graph.outputs()) foldable[static_cast<size_t>(o.node)] = false;
  for (const auto& u : graph.updates()) foldable[static_cast<size_t>(u.value)] = false;
  return foldable;
}

}  // namespace

ExecutionPlan plan_execution(const Graph& graph) {
  const std::vector<bool> live = live_nodes(graph);
  const std::vector<bool> foldable = foldable_nodes(graph, live);
  ExecutionPlan plan;
  plan.nodes.resize(static_cast<size_t>(graph.size()));
  plan.last_use.assign(static_cast<size_t>(graph.size()), -1);
  for (int i = 0; i < graph.size(); ++i) {
    const Node& n = graph.node(i);
    NodePlan& p = plan.nodes[static_cast<size_t>(i)];
    p.folded = foldable[static_cast<size_t>(i)];
    if (p.folded) continue;  // its readers read its input
    p.inputs = n.inputs;
    for (size_t k = 0; k < 2 && k < p.inputs.size(); ++k) {
      const int in = p.inputs[k];
      if (!foldable[static_cast<size_t>(in)]) continue;
      const Node& folded = graph.node(in);
      p.inputs[k] = folded.inputs[0];
      if (n.op == Op::kMatMul) {
        (k == 0 ? p.matmul.a_transposed : p.matmul.b_transposed) = true;
      } else {  // a broadcast: its input's dims sit at its axes, numpy-broadcast to the output
        for (int64_t axis : folded.attrs.axes)
          p.binary.map[k].push_back(n.shape.rank() - folded.shape.rank() + axis);
      }
    }
  }
  for (int i = 0; i < graph.size(); ++i) {
    NodePlan& p = plan.nodes[static_cast<size_t>(i)];
    p.dead = !live[static_cast<size_t>(i)];
    if (p.dead || p.folded) continue;
    for (int in : p.inputs) plan.last_use[static_cast<size_t>(in)] = i;
  }
  for (const auto& o : graph.outputs()) plan.last_use[static_cast<size_t>(o.node)] = graph.size();
  for (const auto& u : graph.updates()) plan.last_use[static_cast<size_t>(u.value)] = graph.size();
  return plan;
}

}  // namespace tpusim::runtime::cpu
