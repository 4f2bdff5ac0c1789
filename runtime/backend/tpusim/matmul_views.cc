// How matmuls read their operands where they lie (matmul_operand_view, lowering.h): through
// chains of transposes, as XLA's TransposeFolding and layout assignment make a transpose before a
// dot a bitcast of its operand; and the buffers a matmul's rule uses, which follow.
#include <numeric>
#include <optional>
#include <vector>

#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

namespace {

// The view of a matmul's operand read from `source`, whose axis perm[i] is the operand's axis i
// (`batched`: a product with no operand shared between its entries); none when the product
// cannot read it so (matmul_operand_view).
std::optional<MatmulOperandView> view_through(const Graph& graph, int source,
                                              const std::vector<int64_t>& perm, bool batched) {
  MatmulOperandView view;
  view.source = source;
  // The last two as they lie or swapped.
  view.transposed = permutes_tail(perm, {1, 0});
  if (view.transposed || permutes_tail(perm, {0, 1})) return view;
  // [..., S, H, D] read as [..., H, S, D] or [..., H, D, S].
  view.transposed = permutes_tail(perm, {1, 2, 0});
  if (!batched || perm.size() < 4 || !(view.transposed || permutes_tail(perm, {1, 0, 2})))
    return std::nullopt;
  const Shape& shape = graph.node(source).shape;
  const int r = shape.rank();
  view.heads = static_cast<uint64_t>(shape.dim(r - 2));
  view.rows = static_cast<uint64_t>(shape.dim(r - 3));
  view.cols = static_cast<uint64_t>(shape.dim(r - 1));
  return view;
}

}  // namespace

bool permutes_tail(const std::vector<int64_t>& perm, const std::vector<int64_t>& tail) {
  const auto r = static_cast<int64_t>(perm.size()), n = static_cast<int64_t>(tail.size());
  if (r < n) return false;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t want = i < r - n ? i : r - n + tail[static_cast<size_t>(i - (r - n))];
    if (perm[static_cast<size_t>(i)] != want) return false;
  }
  return true;
}

MatmulOperandView matmul_operand_view(const Graph& graph, int id, int operand) {
  const Node& n = graph.node(id);
  const int input = n.inputs[static_cast<size_t>(operand)];
  MatmulOperandView view;
  view.source = input;
  const int r = graph.node(input).shape.rank();
  const bool shared = graph.node(n.inputs[1]).shape.rank() == 2;
  if (n.op != Op::kMatMul || (operand == 0 && r != 2 && shared)) return view;
  std::vector<int64_t> perm(static_cast<size_t>(r));
  std::iota(perm.begin(), perm.end(), 0);
  for (int at = input; graph.node(at).op == Op::kTranspose;) {
    const Node& t = graph.node(at);
    for (int64_t& p : perm) p = t.attrs.axes[static_cast<size_t>(p)];
    at = t.inputs[0];
    if (const auto deeper = view_through(graph, at, perm, !shared)) view = *deeper;
  }
  return view;
}

BufferUses matmul_uses(const Graph& graph, int id) {
  BufferUses uses{{}, {id}};
  for (int operand = 0; operand < 2; ++operand)
    uses.reads.push_back(matmul_operand_view(graph, id, operand).source);
  return uses;
}

}  // namespace tpusim::runtime::tpusim_backend
