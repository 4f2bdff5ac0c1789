// The graph patterns the fused convolutions match (conv_patterns.h).
#include "runtime/backend/tpusim/conv_patterns.h"

#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

int sole_reader(const Graph& graph, const std::vector<bool>& needed, int id) {
  for (const auto& o : graph.outputs())
    if (o.node == id) return -1;
  for (const auto& u : graph.updates())
    if (u.value == id) return -1;
  int reader = -1;
  for (int r = 0; r < graph.size(); ++r) {
    if (!needed[static_cast<size_t>(r)]) continue;
    for (int in : lowering_uses(graph, r).needs()) {
      if (in != id) continue;
      if (reader >= 0 && reader != r) return -1;
      reader = r;
    }
  }
  return reader;
}

bool image_matmul(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  return n.op == Op::kMatMul && graph.node(n.inputs[0]).shape.rank() == 4 &&
         graph.node(n.inputs[1]).shape.rank() == 2;
}

int filter_grad_patches(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kMatMul || n.shape.rank() != 2) return -1;
  const Node& lhs = graph.node(n.inputs[0]);
  if (lhs.op != Op::kTranspose || lhs.attrs.axes != std::vector<int64_t>{1, 0}) return -1;
  int source = lhs.inputs[0];
  while (graph.node(source).op == Op::kReshape) source = graph.node(source).inputs[0];
  const Node& e = graph.node(source);
  if (e.op != Op::kExtractPatches || e.shape.rank() != 4) return -1;
  const Shape& g = graph.node(n.inputs[1]).shape;
  const bool rows_match = g.dim(0) == e.shape.elements() / e.shape.dim(3);
  return rows_match && n.shape.dim(0) == e.shape.dim(3) ? source : -1;
}

}  // namespace tpusim::runtime::tpusim_backend
