// Lowering of the index ops: one_hot, argmax and the counter-based RNG.
#include <algorithm>
#include <map>
#include <numeric>

#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

absl::Status lower_one_hot(Lowering& l, int id) {
  const Node& n = l.node(id);
  const auto depth = static_cast<uint32_t>(n.attrs.depth);
  std::vector<float> iota(depth);
  std::iota(iota.begin(), iota.end(), 0.0f);
  const uint64_t iota_row = l.hbm.constant(iota);
  const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / depth;
  l.emit.rowwise(l.address(id), rows, depth, isa::F32,
                 {TileOperand{TileOperand::Kind::kColumn, l.address(n.inputs[0]), isa::S32},
                  TileOperand{TileOperand::Kind::kRow, iota_row, isa::F32}},
                 2, 0, [&](Tile& t) {
                   sim::CoreBuilder& b = t.e_builder();
                   t.chain(b.cast(t.scratch(0, 1), t.in(0)));            // labels as f32 [rows, 1]
                   t.chain(b.broadcast(t.scratch(1), t.scratch(0, 1)));  // [rows, depth]
                   t.chain(b.binary(Vector::CMP_EQ, t.out(), t.scratch(1), t.in(1)));
                 });
  return absl::OkStatus();
}

// The first index of the maximum along the last axis, or of the first NaN (XLA's argmax, whose
// reducer orders NaN above every number: sim/numerics/nan_order.h):
// -max(select(x == x, select(x == max, -iota, -inf), -iota)). In a row with a NaN the max is
// NaN, equal to nothing, and only the NaNs' -iota compete.
absl::Status lower_argmax(Lowering& l, int id) {
  const Node& n = l.node(id);
  Shape in = l.node(n.inputs[0]).shape;
  uint64_t src = l.address(n.inputs[0]);
  if (n.attrs.axis != in.rank() - 1) {
    // Move the axis last (the other dims keep their order, as in the output), then as below.
    std::vector<int64_t> perm;
    for (int d = 0; d < in.rank(); ++d) {
      if (d != n.attrs.axis) perm.push_back(d);
    }
    perm.push_back(n.attrs.axis);
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(in.dim(static_cast<int>(p)));
    const uint64_t moved = l.hbm.temporary(static_cast<uint64_t>(in.elements()) * 4);
    if (absl::Status s = emit_transpose(l, src, in, perm, moved); !s.ok()) return s;
    src = moved;
    in = Shape(dims);
  }
  const uint32_t cols = cols_of(in);
  std::vector<float> neg_iota(cols), floor_row(cols, -3.0e38f);
  for (uint32_t i = 0; i < cols; ++i) neg_iota[i] = -static_cast<float>(i);
  const uint64_t neg_iota_row = l.hbm.constant(neg_iota);
  const uint64_t floor = l.hbm.constant(floor_row);
  l.emit.rowwise(l.address(id), rows_of(in), 1, isa::S32,
                 {TileOperand{TileOperand::Kind::kFull, src, isa::F32, cols},
                  TileOperand{TileOperand::Kind::kRow, neg_iota_row, isa::F32, cols},
                  TileOperand{TileOperand::Kind::kRow, floor, isa::F32, cols}},
                 3, cols, [&](Tile& t) {
                   sim::CoreBuilder& b = t.e_builder();
                   const isa::Block max = t.scratch(0, 1);
                   t.chain(b.reduce(Vector::REDUCE_MAX, max, t.in(0), 1));
                   t.chain(b.binary(Vector::CMP_EQ, t.scratch(1), t.in(0), max));
                   t.chain(b.select(t.scratch(2), t.scratch(1), t.in(1), t.in(2)));
                   t.chain(b.binary(Vector::CMP_EQ, t.scratch(1), t.in(0), t.in(0)));  // not NaN
                   t.chain(b.select(t.scratch(2), t.scratch(1), t.scratch(2), t.in(1)));
                   t.chain(b.reduce(Vector::REDUCE_MAX, max, t.scratch(2), 1));
                   t.chain(b.unary(Vector::NEG, max, max));
                   t.chain(b.cast(t.out(), max));
                 });
  return absl::OkStatus();
}

absl::Status lower_rng(Lowering& l, int id) {
  const Node& n = l.node(id);
  const uint32_t cols = cols_of(n.shape);
  const uint64_t seed = n.attrs.seed;
  l.emit.rowwise(l.address(id), rows_of(n.shape), cols, isa::F32, {}, 0, 0, [&](Tile& t) {
    t.chain(
        t.e_builder().vector(sim::vector_ops::rng_uniform(t.out(), seed, t.first_row() * cols)));
  });
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
