// Lowering of reduce_sum and reduce_max (over any axes, in a fixed order).
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>

#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// The rows of [k, inner] f32 that reduce_range's column path reduces a pass: an eighth of a
// tile's budget. Under 2 it cannot shorten its input (turn_wide_columns transposes those first).
int64_t column_rows_a_pass(const Lowering& l, int64_t inner) {
  return static_cast<int64_t>(l.emit.tile_budget_bytes() / 8) / (inner * 4);
}

void reduce_range(Lowering& l, Op op, uint64_t src, const Shape& in, int first, int last,
                  uint64_t dst, bool round);

// Rows [outer, k] wider than a tile (a whole large variable's sum): each row's column chunks
// reduce into partial results, [outer, parts], which a second pass reduces; each chunk is one
// fragment over strided rows, writing one column of the partials.
void reduce_wide_rows(Lowering& l, Op op, uint64_t src, int64_t outer, int64_t k, uint64_t dst,
                      bool round) {
  const Vector::Op vop = op == Op::kReduceMax ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  // The widest whole vector rows (128 lanes) that leave room for the tile's other blocks.
  const uint64_t budget = l.emit.tile_budget_bytes();
  const int64_t chunk = std::max<int64_t>(
      128, static_cast<int64_t>(budget > 1024 ? (budget - 1024) / 4 / 128 * 128 : 0));
  const int64_t parts = (k + chunk - 1) / chunk;
  const uint64_t partial = l.hbm.temporary(static_cast<uint64_t>(outer * parts) * 4);
  for (int64_t p = 0; p < parts; ++p) {
    TileOperand column{TileOperand::Kind::kFull, partial + static_cast<uint64_t>(p) * 4, isa::F32,
                       1};
    column.stride = static_cast<uint64_t>(parts) * 4;
    TileOperand rows{TileOperand::Kind::kFull, src + static_cast<uint64_t>(p * chunk) * 4, isa::F32,
                     static_cast<uint32_t>(std::min(chunk, k - p * chunk))};
    rows.stride = static_cast<uint64_t>(k) * 4;
    l.emit.rowwise(column, static_cast<uint64_t>(outer), {rows}, 0, 0,
                   [&](Tile& t) { t.chain(t.e_builder().reduce(vop, t.out(), t.in(0), 1)); });
  }
  reduce_range(l, op, partial, Shape{outer, parts}, 1, 2, dst, round);
}

// Leading axes over a long input [k, inner]: one pipelined fragment, as XLA's reduce fusion,
// reducing each row tile down its columns and adding that partial row to an accumulator in
// order, the next tile loading while this one reduces; the sum is written once.
void reduce_long_columns(Lowering& l, Op op, uint64_t src, int64_t k, int64_t inner, uint64_t dst,
                         bool round) {
  const Vector::Op vop = op == Op::kReduceMax ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  const Vector::Op combine = op == Op::kReduceMax ? Vector::MAX : Vector::ADD;
  const TileOperand rows{TileOperand::Kind::kFull, src, isa::F32, static_cast<uint32_t>(inner)};
  const auto cols = static_cast<uint32_t>(inner);
  const isa::Block sum =
      l.emit.reduce_rows(static_cast<uint64_t>(k), {rows}, 1, cols, cols, [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        if (t.first_row() == 0) {
          t.chain(b.reduce(vop, t.accumulator(), t.in(0), 0));
          return;
        }
        const isa::Block part = block(t.scratch(0).address(), 1, cols, isa::F32);
        t.chain(b.reduce(vop, part, t.in(0), 0));
        t.chain(b.binary(combine, t.accumulator(), t.accumulator(), part));
      });
  Tile after = l.emit.epilogue();
  if (round) round_bf16_in_tile(after, sum, true);
  after.store(sum, block(dst, 1, cols, isa::F32), after.chain_count());
}

// Reduces axes [first, last) of `in` (buffer src) into dst: the input is viewed as
// [outer, k, inner]. Trailing axes (inner == 1) reduce each row (a row wider than a tile in
// column chunks, then their partial results); otherwise the k slices of each row are combined
// one by one (strided blocks), which keeps the order fixed. With `round`, the result is rounded to
// bf16 values before it is stored.
void reduce_range(Lowering& l, Op op, uint64_t src, const Shape& in, int first, int last,
                  uint64_t dst, bool round) {
  const int64_t outer = dims_product(in, 0, first), k = dims_product(in, first, last),
                inner = dims_product(in, last, in.rank());
  const Vector::Op vop = op == Op::kReduceMax ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  const Vector::Op combine = op == Op::kReduceMax ? Vector::MAX : Vector::ADD;
  if (inner == 1 &&
      Emitter::tile_bytes({static_cast<uint64_t>(k), 1}, 1) > l.emit.tile_budget_bytes()) {
    reduce_wide_rows(l, op, src, outer, k, dst, round);
    return;
  }
  if (inner == 1) {
    l.emit.rowwise(dst, static_cast<uint64_t>(outer), 1, isa::F32,
                   {TileOperand{TileOperand::Kind::kFull, src, isa::F32, static_cast<uint32_t>(k)}},
                   0, 0, [&](Tile& t) {
                     t.chain(t.e_builder().reduce(vop, t.out(), t.in(0), 1));
                     if (round) round_bf16_in_tile(t, t.out(), false);
                   });
    return;
  }
  if (outer == 1 && k * inner * 4 > static_cast<int64_t>(l.emit.tile_budget_bytes() / 4)) {
    reduce_long_columns(l, op, src, k, inner, dst, round);
    return;
  }
  if (outer == 1) {
    // Leading axes that fit a tile: one reduction down the columns.
    l.emit.rowwise(
        dst, 1, static_cast<uint32_t>(inner), isa::F32,
        {TileOperand{TileOperand::Kind::kRow, src, isa::F32, static_cast<uint32_t>(k * inner)}}, 0,
        0, [&](Tile& t) {
          t.chain(t.e_builder().reduce(vop, t.out(),
                                       block(t.in(0).address(), static_cast<uint32_t>(k),
                                             static_cast<uint32_t>(inner), isa::F32),
                                       0));
          if (round) round_bf16_in_tile(t, t.out(), false);
        });
    return;
  }
  // Each output row o: combine the k slices [inner] of input row o.
  const auto width = static_cast<uint32_t>(k * inner);
  l.emit.rowwise(dst, static_cast<uint64_t>(outer), static_cast<uint32_t>(inner), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, src, isa::F32, width}}, 0, 0, [&](Tile& t) {
                   sim::CoreBuilder& b = t.e_builder();
                   const isa::Block row = t.in(0);
                   auto slice = [&](int64_t j) {
                     return block(row.address() + static_cast<uint64_t>(j * inner) * 4, t.rows(),
                                  static_cast<uint32_t>(inner), isa::F32,
                                  static_cast<uint64_t>(width) * 4);
                   };
                   t.chain(b.unary(Vector::COPY, t.out(), slice(0)));
                   for (int64_t j = 1; j < k; ++j)
                     t.chain(b.binary(combine, t.out(), t.out(), slice(j)));
                   if (round) round_bf16_in_tile(t, t.out(), false);
                 });
}

// A reduction down the columns of [k, inner] whose rows are too wide for reduce_range's column
// path to load two at a time (the gradient of a bias as wide as BERT's 30,522-token vocabulary,
// or of its position embeddings, [seq, hidden] summed over the batch): transposed to [inner, k]
// first, so each output is the reduction of a row. The
// sum order (k in order) is unchanged. Other reductions are left as they are.
absl::Status turn_wide_columns(Lowering& l, uint64_t* src, Shape* shape, int64_t* first,
                               int64_t* end) {
  if (*first != 0 || *end >= shape->rank()) return absl::OkStatus();
  const int64_t k = dims_product(*shape, 0, static_cast<int>(*end));
  const int64_t inner = dims_product(*shape, static_cast<int>(*end), shape->rank());
  if (column_rows_a_pass(l, inner) >= 2) return absl::OkStatus();
  const uint64_t turned = l.hbm.temporary(static_cast<uint64_t>(k * inner) * 4);
  if (auto s = emit_transpose(l, *src, Shape{k, inner}, {1, 0}, turned); !s.ok()) return s;
  *src = turned;
  *shape = Shape{inner, k};
  *first = 1;
  *end = 2;
  return absl::OkStatus();
}

}  // namespace

absl::Status lower_reduce(Lowering& l, int id) {
  const Node& n = l.node(id);
  Shape shape = l.node(n.inputs[0]).shape;
  uint64_t src = l.address(n.inputs[0]);
  std::vector<int64_t> axes = n.attrs.axes;
  if (axes.empty()) {  // nothing to reduce: a copy
    l.emit.copy(src, 0, l.address(id), 0, 1, static_cast<uint32_t>(shape.elements()), isa::F32);
    return absl::OkStatus();
  }
  // Reduce contiguous runs of axes, the last run first (earlier axes keep their positions),
  // through temporaries.
  std::sort(axes.begin(), axes.end());
  while (!axes.empty()) {
    int64_t end = axes.back() + 1;
    int64_t first = axes.back();
    axes.pop_back();
    while (!axes.empty() && axes.back() == first - 1) {
      first = axes.back();
      axes.pop_back();
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < shape.rank(); ++d) {
      if (d < first || d >= end) dims.push_back(shape.dim(d));
    }
    const Shape reduced(dims);
    const uint64_t dst = axes.empty()
                             ? l.address(id)
                             : l.hbm.temporary(static_cast<uint64_t>(reduced.elements()) * 4);
    if (auto s = turn_wide_columns(l, &src, &shape, &first, &end); !s.ok()) return s;
    // The last pass writes the node: a bf16 sum leaves it rounded (leaves_f32_sums).
    reduce_range(l, n.op, src, shape, static_cast<int>(first), static_cast<int>(end), dst,
                 axes.empty() && leaves_f32_sums(n));
    src = dst;
    shape = reduced;
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
