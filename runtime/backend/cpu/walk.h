#pragma once
// The index walk under the cpu backend's layout, broadcast and reduction kernels: every index of
// a shape in row-major order, with the offsets it reaches in two operands.

#include <cstdint>
#include <vector>

#include "runtime/graph/tensor.h"

namespace tpusim::runtime::cpu {

// One row of a walk: the last dimension's `count` indices from linear index k, the operands'
// offsets starting at ia and ib and advancing by step_a and step_b (0: a broadcast operand).
struct Row {
  int64_t k, ia, ib, count, step_a, step_b;
};

// Calls row(Row) for every row of `shape` in row-major order: the offsets reached from base_a
// and base_b when each dimension advances them by sa[d] and sb[d] (0 for a broadcast
// dimension). The rows are walked as an odometer (no division per element), so the visiting
// order, and with it the order of any sum accumulated over the rows in order, is row-major.
template <typename F>
void walk_rows(const Shape& shape, const std::vector<int64_t>& sa, int64_t base_a,
               const std::vector<int64_t>& sb, int64_t base_b, F row) {
  const int rank = shape.rank();
  const int64_t n = shape.elements();
  if (n == 0) return;
  if (rank == 0) {
    row(Row{0, base_a, base_b, 1, 0, 0});
    return;
  }
  const auto last = static_cast<size_t>(rank - 1);
  const int64_t inner = shape.dim(rank - 1);
  std::vector<int64_t> idx(last, 0);
  int64_t ia = base_a, ib = base_b;
  for (int64_t k = 0; k < n; k += inner) {
    row(Row{k, ia, ib, inner, sa[last], sb[last]});
    for (size_t d = last; d-- > 0;) {
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < shape.dim(static_cast<int>(d))) break;
      ia -= sa[d] * idx[d];
      ib -= sb[d] * idx[d];
      idx[d] = 0;
    }
  }
}

// walk_rows with the first axis's slices shared among the host's threads, each slice's rows
// walked in row-major order as above. For a `row` whose writes at one slice no other slice reads
// or writes (an elementwise kernel, or a reduction whose first axis is kept), the result is
// walk_rows's, bit for bit, on any number of threads.
template <typename F>
void parallel_walk_rows(const Shape& shape, const std::vector<int64_t>& sa, int64_t base_a,
                        const std::vector<int64_t>& sb, int64_t base_b, F row) {
  const int64_t n = shape.elements();
  if (shape.rank() < 2 || n < (int64_t{1} << 16)) {
    walk_rows(shape, sa, base_a, sb, base_b, row);
    return;
  }
  const Shape slice(std::vector<int64_t>(shape.dims().begin() + 1, shape.dims().end()));
  const std::vector<int64_t> slice_a(sa.begin() + 1, sa.end()), slice_b(sb.begin() + 1, sb.end());
  const int64_t slices = shape.dim(0), per_slice = slice.elements();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < slices; ++i) {
    walk_rows(slice, slice_a, base_a + i * sa[0], slice_b, base_b + i * sb[0], [&](Row r) {
      r.k += i * per_slice;
      row(r);
    });
  }
}

// Calls f(k, ia, ib) for every index of `shape` in row-major order (walk_rows, element by
// element).
template <typename F>
void walk_indices(const Shape& shape, const std::vector<int64_t>& sa, int64_t base_a,
                  const std::vector<int64_t>& sb, int64_t base_b, F f) {
  walk_rows(shape, sa, base_a, sb, base_b, [&](const Row& r) {
    for (int64_t j = 0; j < r.count; ++j) f(r.k + j, r.ia + j * r.step_a, r.ib + j * r.step_b);
  });
}

// The same, the first axis's slices on the host's threads (parallel_walk_rows).
template <typename F>
void parallel_walk_indices(const Shape& shape, const std::vector<int64_t>& sa, int64_t base_a,
                           const std::vector<int64_t>& sb, int64_t base_b, F f) {
  parallel_walk_rows(shape, sa, base_a, sb, base_b, [&](const Row& r) {
    for (int64_t j = 0; j < r.count; ++j) f(r.k + j, r.ia + j * r.step_a, r.ib + j * r.step_b);
  });
}

// One operand: f(k, i) with i advancing by `strides` from `base`.
template <typename F>
void walk(const Shape& shape, const std::vector<int64_t>& strides, int64_t base, F f) {
  walk_indices(shape, strides, base, strides, base,
               [&](int64_t k, int64_t i, int64_t) { f(k, i); });
}

// The same, the first axis's slices on the host's threads (parallel_walk_indices).
template <typename F>
void parallel_walk(const Shape& shape, const std::vector<int64_t>& strides, int64_t base, F f) {
  parallel_walk_indices(shape, strides, base, strides, base,
                        [&](int64_t k, int64_t i, int64_t) { f(k, i); });
}

}  // namespace tpusim::runtime::cpu
