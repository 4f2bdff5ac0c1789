// GraphBuilder's indexing ops: gather (an embedding lookup) and its adjoint scatter_add. Their
// semantics (clamped indices, the order of the sums) are graph.h's, kGather and kScatterAdd.
#include "common/strings.h"
#include "runtime/graph/builder.h"
#include "runtime/graph/builder_checks.h"

namespace tpusim::runtime {
namespace {

using builder_checks::shapes_of;

// The shape [..., D] of `indices`' dims followed by `depth`.
Shape indices_then(const Shape& indices, int64_t depth) {
  std::vector<int64_t> dims = indices.dims();
  dims.push_back(depth);
  return Shape(dims);
}

}  // namespace

Value GraphBuilder::gather(Value table, Value indices) {
  if (!usable({table, indices})) return {};
  if (table.shape().rank() != 2 || !is_floating(table.dtype())) {
    return fail(Op::kGather, str_cat("needs a floating table [rows, columns], got ",
                                     shapes_of({table}), " (indices ", shapes_of({indices}), ")"));
  }
  if (table.shape().dim(0) < 1) {
    return fail(Op::kGather,
                str_cat("the table ", shapes_of({table}), " has no rows for indices to name"));
  }
  if (indices.dtype() != DType::kS32) {
    return fail(Op::kGather, str_cat("needs s32 indices, got ", shapes_of({indices}), " (table ",
                                     shapes_of({table}), ")"));
  }
  return add(Op::kGather, {table, indices}, table.dtype(),
             indices_then(indices.shape(), table.shape().dim(1)));
}

Value GraphBuilder::scatter_add(Value updates, Value indices, int64_t rows) {
  if (!usable({updates, indices})) return {};
  if (indices.dtype() != DType::kS32) {
    return fail(Op::kScatterAdd, str_cat("needs s32 indices, got ", shapes_of({indices}),
                                         " (updates ", shapes_of({updates}), ")"));
  }
  if (!is_floating(updates.dtype()) || updates.shape().rank() != indices.shape().rank() + 1) {
    return fail(Op::kScatterAdd,
                str_cat("needs floating updates [..., columns] of the indices' shape plus one "
                        "dimension, got updates ",
                        shapes_of({updates}), " and indices ", shapes_of({indices})));
  }
  const int64_t columns = updates.shape().dim(updates.shape().rank() - 1);
  if (updates.shape() != indices_then(indices.shape(), columns)) {
    return fail(Op::kScatterAdd, str_cat("updates ", shapes_of({updates}), " do not match indices ",
                                         shapes_of({indices}), " (want updates ",
                                         indices_then(indices.shape(), columns).str(), ")"));
  }
  if (rows < 1) return fail(Op::kScatterAdd, str_cat("rows ", rows, " must be >= 1"));
  Attrs attrs;
  attrs.depth = rows;
  return add(Op::kScatterAdd, {updates, indices}, updates.dtype(), Shape{rows, columns},
             std::move(attrs));
}

}  // namespace tpusim::runtime
