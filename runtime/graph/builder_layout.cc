// GraphBuilder's layout ops: reshape, transpose, broadcast, concat, slice and pad, each checked
// against its operand's shape (the semantics are graph.h's).
#include <algorithm>
#include <numeric>

#include "runtime/graph/builder.h"
#include "runtime/graph/builder_checks.h"

namespace tpusim::runtime {

using builder_checks::shapes_of;
using builder_checks::valid_axes;

Value GraphBuilder::reshape(Value a, const Shape& shape) {
  if (!usable({a})) return {};
  if (shape.elements() != a.shape().elements()) {
    return fail(Op::kReshape,
                str_cat("cannot reshape ", shapes_of({a}), " (", a.shape().elements(),
                        " elements) to ", shape.str(), " (", shape.elements(), " elements)"));
  }
  return add(Op::kReshape, {a}, a.dtype(), shape);
}

Value GraphBuilder::transpose(Value a, std::vector<int64_t> permutation) {
  if (!usable({a})) return {};
  if (static_cast<int>(permutation.size()) != a.shape().rank() ||
      !valid_axes(permutation, a.shape().rank())) {
    return fail(Op::kTranspose, str_cat("[", str_join(permutation, ", "),
                                        "] is not a permutation of the axes of ", shapes_of({a})));
  }
  std::vector<int64_t> dims;
  for (int64_t p : permutation) dims.push_back(a.shape().dim(static_cast<int>(p)));
  Attrs attrs;
  attrs.axes = std::move(permutation);
  return add(Op::kTranspose, {a}, a.dtype(), Shape(dims), std::move(attrs));
}

Value GraphBuilder::broadcast(Value a, const Shape& shape, std::vector<int64_t> dims) {
  if (!usable({a})) return {};
  bool ok = static_cast<int>(dims.size()) == a.shape().rank() && valid_axes(dims, shape.rank()) &&
            std::is_sorted(dims.begin(), dims.end());
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    const int64_t from = a.shape().dim(static_cast<int>(i));
    ok = from == 1 || from == shape.dim(static_cast<int>(dims[i]));
  }
  if (!ok) {
    return fail(Op::kBroadcast, str_cat("cannot broadcast ", shapes_of({a}), " to ", shape.str(),
                                        " along dims [", str_join(dims, ", "), "]"));
  }
  Attrs attrs;
  attrs.axes = std::move(dims);
  return add(Op::kBroadcast, {a}, a.dtype(), shape, std::move(attrs));
}

Value GraphBuilder::broadcast_to(Value a, const Shape& shape) {
  if (!usable({a})) return {};
  if (a.shape() == shape) return a;
  const int offset = shape.rank() - a.shape().rank();
  if (offset < 0)
    return fail(Op::kBroadcast,
                str_cat("cannot broadcast ", shapes_of({a}), " to the lower rank ", shape.str()));
  std::vector<int64_t> dims(static_cast<size_t>(a.shape().rank()));
  std::iota(dims.begin(), dims.end(), offset);
  return broadcast(a, shape, dims);
}

Value GraphBuilder::concat(const std::vector<Value>& parts, int64_t axis) {
  if (!status_.ok() || parts.empty())
    return parts.empty() ? fail(Op::kConcat, "needs at least one operand") : Value{};
  for (const Value& p : parts) {
    if (!p.valid()) return {};
  }
  const Shape& first = parts[0].shape();
  if (axis < 0 || axis >= first.rank())
    return fail(Op::kConcat, str_cat("axis ", axis, " is not an axis of ", first.str()));
  std::vector<int64_t> dims = first.dims();
  dims[static_cast<size_t>(axis)] = 0;
  std::vector<Value> inputs;
  for (const Value& p : parts) {
    bool ok = p.shape().rank() == first.rank() && p.dtype() == parts[0].dtype();
    for (int i = 0; ok && i < first.rank(); ++i) ok = i == axis || p.shape().dim(i) == first.dim(i);
    if (!ok)
      return fail(Op::kConcat, str_cat("operands ", first.str(), " and ", p.shape().str(),
                                       " differ off axis ", axis));
    dims[static_cast<size_t>(axis)] += p.shape().dim(static_cast<int>(axis));
    inputs.push_back(p);
  }
  Attrs attrs;
  attrs.axis = axis;
  return add(Op::kConcat, inputs, parts[0].dtype(), Shape(dims), std::move(attrs));
}

Value GraphBuilder::slice(Value a, std::vector<int64_t> begin, std::vector<int64_t> end) {
  if (!usable({a})) return {};
  const int rank = a.shape().rank();
  bool ok = static_cast<int>(begin.size()) == rank && static_cast<int>(end.size()) == rank;
  std::vector<int64_t> dims;
  for (int i = 0; ok && i < rank; ++i) {
    ok = 0 <= begin[static_cast<size_t>(i)] &&
         begin[static_cast<size_t>(i)] < end[static_cast<size_t>(i)] &&
         end[static_cast<size_t>(i)] <= a.shape().dim(i);
    dims.push_back(end[static_cast<size_t>(i)] - begin[static_cast<size_t>(i)]);
  }
  if (!ok) {
    return fail(Op::kSlice, str_cat("[", str_join(begin, ", "), "] to [", str_join(end, ", "),
                                    ") is not a non-empty range of ", shapes_of({a})));
  }
  Attrs attrs;
  attrs.begin = std::move(begin);
  attrs.end = std::move(end);
  return add(Op::kSlice, {a}, a.dtype(), Shape(dims), std::move(attrs));
}

Value GraphBuilder::pad(Value a, std::vector<int64_t> before, std::vector<int64_t> after) {
  if (!usable({a})) return {};
  const int rank = a.shape().rank();
  bool ok = static_cast<int>(before.size()) == rank && static_cast<int>(after.size()) == rank;
  std::vector<int64_t> dims;
  for (int i = 0; ok && i < rank; ++i) {
    ok = before[static_cast<size_t>(i)] >= 0 && after[static_cast<size_t>(i)] >= 0;
    dims.push_back(a.shape().dim(i) + before[static_cast<size_t>(i)] +
                   after[static_cast<size_t>(i)]);
  }
  if (!ok)
    return fail(Op::kPad,
                str_cat("padding must be >= 0 and given for every axis of ", shapes_of({a})));
  Attrs attrs;
  attrs.begin = std::move(before);
  attrs.end = std::move(after);
  return add(Op::kPad, {a}, a.dtype(), Shape(dims), std::move(attrs));
}

}  // namespace tpusim::runtime
