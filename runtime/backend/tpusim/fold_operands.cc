// Which operands an elementwise fragment folds instead of reading a buffer of their own: a
// constant scalar as an immediate (foldable_scalar), a row, column or scalar broadcast as a row,
// column or scalar operand (broadcast_fold).
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

bool foldable_scalar(const Graph& graph, int id, float* value) {
  const Node& n = graph.node(id);
  if (n.dtype == DType::kS32) return false;
  if (n.op == Op::kConstant) {
    if (n.shape.elements() != 1) return false;
    *value = n.attrs.value.f[0];
    return true;
  }
  if (n.op == Op::kBroadcast || n.op == Op::kReshape)
    return foldable_scalar(graph, n.inputs[0], value);
  return false;
}

FoldedBroadcast broadcast_fold(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kBroadcast || n.dtype == DType::kS32 || n.shape.rank() < 2)
    return FoldedBroadcast::kNone;
  const Shape& in = graph.node(n.inputs[0]).shape;
  if (in.elements() == 1 && n.shape.elements() > 1) return FoldedBroadcast::kScalar;
  const int rank = n.shape.rank();
  // The input's size along each output dim (1 where it has none), its dims in order so that its
  // memory order is the output's.
  std::vector<int64_t> along(static_cast<size_t>(rank), 1);
  for (size_t i = 0; i < n.attrs.axes.size(); ++i) {
    if (i > 0 && n.attrs.axes[i] <= n.attrs.axes[i - 1]) return FoldedBroadcast::kNone;
    along[static_cast<size_t>(n.attrs.axes[i])] = in.dim(static_cast<int>(i));
  }
  bool row = along.back() == n.shape.dim(rank - 1), column = along.back() == 1;
  for (int d = 0; d + 1 < rank; ++d) {
    row = row && along[static_cast<size_t>(d)] == 1;
    column = column && along[static_cast<size_t>(d)] == n.shape.dim(d);
  }
  if (row && !column) return FoldedBroadcast::kRow;
  if (column && !row) return FoldedBroadcast::kColumn;
  return FoldedBroadcast::kNone;  // neither, or a [1, 1] output (no broadcast at all)
}

}  // namespace tpusim::runtime::tpusim_backend
