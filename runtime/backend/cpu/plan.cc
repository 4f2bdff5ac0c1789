#include "runtime/backend/cpu/plan.h"

#include <algorithm>

#include "runtime/backend/cpu/gemm.h"

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

// Per node, whether it is an output or an update's value: never folded away.
std::vector<bool> results(const Graph& graph) {
  std::vector<bool> result(static_cast<size_t>(graph.size()), false);
  for (const auto& o : graph.outputs()) result[static_cast<size_t>(o.node)] = true;
  for (const auto& u : graph.updates()) result[static_cast<size_t>(u.value)] = true;
  return result;
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
  const std::vector<bool> result = results(graph);
  for (size_t i = 0; i < foldable.size(); ++i) foldable[i] = foldable[i] && !result[i];
  return foldable;
}

// Each node's live readers.
std::vector<std::vector<int>> live_readers(const Graph& graph, const std::vector<bool>& live) {
  std::vector<std::vector<int>> readers(static_cast<size_t>(graph.size()));
  for (int i = 0; i < graph.size(); ++i) {
    if (!live[static_cast<size_t>(i)]) continue;
    for (int in : graph.node(i).inputs) {
      auto& list = readers[static_cast<size_t>(in)];
      if (list.empty() || list.back() != i) list.push_back(i);
    }
  }
  return readers;
}

// A matmul reading `id` as its lhs only, against a rank-2 rhs.
bool reads_as_lhs(const Graph& graph, int matmul, int id) {
  const Node& m = graph.node(matmul);
  return m.op == Op::kMatMul && m.inputs[0] == id && m.inputs[1] != id &&
         graph.node(m.inputs[1]).shape.rank() == 2;
}

// The matmuls that read patches node `e` as their lhs, as stored (the forward product) or
// flattened to [rows, kh * kw * C] and transposed (the weight gradient, whose outputs fit
// depth_blocks_fit), with the flattenings; false if anything else reads it.
bool patch_readers(const Graph& graph, const std::vector<std::vector<int>>& readers,
                   const std::vector<NodePlan>& nodes, int e, std::vector<int>* matmuls,
                   std::vector<int>* flattenings) {
  const Node& patches = graph.node(e);
  for (int reader : readers[static_cast<size_t>(e)]) {
    const Node& r = graph.node(reader);
    if (reads_as_lhs(graph, reader, e)) {
      matmuls->push_back(reader);
      continue;
    }
    if (r.op != Op::kReshape || r.shape.rank() != 2 || r.shape.dim(1) != patches.shape.dim(3))
      return false;
    flattenings->push_back(reader);
    for (int t : readers[static_cast<size_t>(reader)]) {
      if (!nodes[static_cast<size_t>(t)].folded || graph.node(t).op != Op::kTranspose) return false;
      for (int m : readers[static_cast<size_t>(t)]) {
        const Shape& out = graph.node(m).shape;
        if (!reads_as_lhs(graph, m, t) || !depth_blocks_fit(out.dim(0), out.dim(1))) return false;
        matmuls->push_back(m);
      }
    }
  }
  return true;
}

// Convolution patches that only matmuls read as their lhs (patch_readers) are made on the fly
// by those products from the image (gemm.h's LhsSource), a block of rows at a time: the
// extract_patches node and its flattenings are never computed, and the image lives until the
// weight gradient in place of patches nine times its size (for a 3x3 window).
void fold_patches(const Graph& graph, const std::vector<bool>& live, std::vector<NodePlan>* nodes) {
  const std::vector<std::vector<int>> readers = live_readers(graph, live);
  const std::vector<bool> result = results(graph);
  for (int e = 0; e < graph.size(); ++e) {
    const Node& patches = graph.node(e);
    if (patches.op != Op::kExtractPatches || !live[static_cast<size_t>(e)] ||
        patches.dtype == DType::kS32 || result[static_cast<size_t>(e)])
      continue;
    std::vector<int> matmuls, flattenings;
    if (!patch_readers(graph, readers, *nodes, e, &matmuls, &flattenings)) continue;
    if (std::any_of(flattenings.begin(), flattenings.end(),
                    [&](int f) { return result[static_cast<size_t>(f)]; }))
      continue;
    (*nodes)[static_cast<size_t>(e)].folded = true;
    for (int f : flattenings) (*nodes)[static_cast<size_t>(f)].folded = true;
    for (int m : matmuls) {
      NodePlan& p = (*nodes)[static_cast<size_t>(m)];
      p.inputs[0] = patches.inputs[0];
      p.matmul.a_patches = &patches;
    }
  }
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
  fold_patches(graph, live, &plan.nodes);
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
