// Lowering of reductions, transposes, concat, slice, pad and matmul.
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

int64_t product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; ++d) p *= s.dim(d);
  return p;
}

// Reduces axes [first, last) of `in` (buffer src) into dst: the input is viewed as
// [outer, k, inner]. Trailing axes (inner == 1) reduce each row (a row wider than a tile in
// column chunks, then their partial results); otherwise the k slices of each row are combined
// one by one (strided blocks), which keeps the order fixed.
void reduce_range(Lowering& l, Op op, uint64_t src, const Shape& in, int first, int last,
                  uint64_t dst) {
  const int64_t outer = product(in, 0, first), k = product(in, first, last),
                inner = product(in, last, in.rank());
  const Vector::Op vop = op == Op::kReduceMax ? Vector::REDUCE_MAX : Vector::REDUCE_SUM;
  const Vector::Op combine = op == Op::kReduceMax ? Vector::MAX : Vector::ADD;
  if (inner == 1 &&
      Emitter::tile_bytes({static_cast<uint64_t>(k), 1}, 1) > l.emit.tile_budget_bytes()) {
    // Rows wider than a tile (a whole large variable's sum): each row's column chunks reduce
    // into partial results, [outer, parts], which a second pass reduces; each chunk is one
    // fragment over strided rows, writing one column of the partials.
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
      TileOperand rows{TileOperand::Kind::kFull, src + static_cast<uint64_t>(p * chunk) * 4,
                       isa::F32, static_cast<uint32_t>(std::min(chunk, k - p * chunk))};
      rows.stride = static_cast<uint64_t>(k) * 4;
      l.emit.rowwise(column, static_cast<uint64_t>(outer), {rows}, 0, 0,
                     [&](Tile& t) { t.chain(t.e_builder().reduce(vop, t.out(), t.in(0), 1)); });
    }
    reduce_range(l, op, partial, Shape{outer, parts}, 1, 2, dst);
    return;
  }
  if (inner == 1) {
    l.emit.rowwise(dst, static_cast<uint64_t>(outer), 1, isa::F32,
                   {TileOperand{TileOperand::Kind::kFull, src, isa::F32, static_cast<uint32_t>(k)}},
                   0, 0, [&](Tile& t) { t.chain(t.e_builder().reduce(vop, t.out(), t.in(0), 1)); });
    return;
  }
  if (outer == 1 && k * inner * 4 > static_cast<int64_t>(l.emit.tile_budget_bytes() / 4)) {
    // Leading axes over a long input: reduce row tiles of [k, inner] down columns into partial
    // rows, then combine the partials (a second pass over a much shorter input).
    const int64_t tile_rows =
        std::max<int64_t>(1, static_cast<int64_t>(l.emit.tile_budget_bytes() / 8) / (inner * 4));
    const int64_t parts = (k + tile_rows - 1) / tile_rows;
    const uint64_t partial = l.hbm.temporary(static_cast<uint64_t>(parts * inner) * 4);
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t rows = std::min(tile_rows, k - p * tile_rows);
      reduce_range(l, op, src + static_cast<uint64_t>(p * tile_rows * inner) * 4,
                   Shape{rows, inner}, 0, 1, partial + static_cast<uint64_t>(p * inner) * 4);
    }
    reduce_range(l, op, partial, Shape{parts, inner}, 0, 1, dst);
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
                 });
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
    const int64_t end = axes.back() + 1;
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
    reduce_range(l, n.op, src, shape, static_cast<int>(first), static_cast<int>(end), dst);
    src = dst;
    shape = reduced;
  }
  return absl::OkStatus();
}

// Transposes that rotate the dimensions between an unchanged prefix and an unchanged suffix:
// a batch of [a, c] -> [c, a] transposes of blocks of `inner` contiguous elements. When a whole
// batch entry fits a VMEM tile, the transpose is one fragment over tiles of whole batch entries:
// DMA in, rearranged by the vector unit, DMA out (transpose_in_vmem). Otherwise, with no suffix
// the vector unit transposes tiles of rows and strided copies place them; with one, strided
// copies move the blocks.
namespace {

// [batch, a, c, inner] at src -> [batch, c, a, inner] at dst as one fragment whose tiles hold
// whole batch entries; false (nothing emitted) when one entry, in and out, does not fit a tile.
bool transpose_in_vmem(Lowering& l, uint64_t src, uint64_t dst, int64_t batch, int64_t a, int64_t c,
                       int64_t inner) {
  const int64_t entry = a * c * inner;
  if (entry > int64_t{UINT32_MAX} ||
      Emitter::tile_bytes({static_cast<uint64_t>(entry), static_cast<uint64_t>(entry)}, 1) >
          l.emit.tile_budget_bytes())
    return false;
  const auto cols = static_cast<uint32_t>(entry);
  l.emit.rowwise(
      dst, static_cast<uint64_t>(batch), cols, isa::F32,
      {TileOperand{TileOperand::Kind::kFull, src, isa::F32, cols}}, 0, 0, [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        const uint64_t in = t.in(0).address(), out = t.out().address(),
                       entry_bytes = uint64_t{cols} * 4;
        const auto ua = static_cast<uint32_t>(a), uc = static_cast<uint32_t>(c);
        if (inner == 1) {  // one vector transpose per entry
          for (uint64_t e = 0; e < t.rows(); ++e) {
            t.chain(b.transpose(block(out + e * entry_bytes, uc, ua, isa::F32),
                                block(in + e * entry_bytes, ua, uc, isa::F32)));
          }
          return;
        }
        // Element (e, i, j, :) sits at in + ((e a + i) c + j) inner and goes to
        // out + ((e c + j) a + i) inner: each of e, i and j steps both addresses by a constant.
        // One vector copy per value of two of them moves a block whose rows step the third,
        // the one with the most values.
        struct Axis {
          int64_t n;
          uint64_t in_step, out_step;  // bytes
        };
        const uint64_t row = static_cast<uint64_t>(inner) * 4;
        std::array<Axis, 3> axes = {Axis{t.rows(), entry_bytes, entry_bytes},
                                    Axis{a, static_cast<uint64_t>(c) * row, row},
                                    Axis{c, row, static_cast<uint64_t>(a) * row}};
        std::sort(axes.begin(), axes.end(), [](const Axis& x, const Axis& y) { return x.n > y.n; });
        const Axis& rows = axes[0];
        for (int64_t p = 0; p < axes[1].n; ++p) {
          for (int64_t q = 0; q < axes[2].n; ++q) {
            const uint64_t from = in + static_cast<uint64_t>(p) * axes[1].in_step +
                                  static_cast<uint64_t>(q) * axes[2].in_step;
            const uint64_t to = out + static_cast<uint64_t>(p) * axes[1].out_step +
                                static_cast<uint64_t>(q) * axes[2].out_step;
            t.chain(b.unary(Vector::COPY,
                            block(to, static_cast<uint32_t>(rows.n), static_cast<uint32_t>(inner),
                                  isa::F32, rows.out_step),
                            block(from, static_cast<uint32_t>(rows.n), static_cast<uint32_t>(inner),
                                  isa::F32, rows.in_step)));
          }
        }
      });
  return true;
}

// Whether `perm` rotates the dims between an unchanged prefix and an unchanged suffix.
bool transpose_rotation_fits(const std::vector<int64_t>& perm) {
  const int rank = static_cast<int>(perm.size());
  int prefix = 0;
  while (prefix < rank && perm[static_cast<size_t>(prefix)] == prefix) ++prefix;
  if (prefix == rank) return true;
  int suffix = rank;
  while (suffix > prefix && perm[static_cast<size_t>(suffix - 1)] == suffix - 1) --suffix;
  const int64_t split = perm[static_cast<size_t>(prefix)];
  for (int d = prefix; d < suffix; ++d) {
    const int64_t pos = d - prefix;
    const int64_t want = pos < suffix - split ? split + pos : prefix + pos - (suffix - split);
    if (perm[static_cast<size_t>(d)] != want) return false;
  }
  return true;
}

// Transposes a tensor (shape `in`, at src) whose permutation rotates the dims between an
// unchanged prefix and suffix, into dst.
absl::Status transpose_rotation(Lowering& l, uint64_t src_base, const Shape& in,
                                const std::vector<int64_t>& perm, uint64_t dst_base) {
  const int rank = in.rank();
  int prefix = 0;
  while (prefix < rank && perm[static_cast<size_t>(prefix)] == prefix) ++prefix;
  if (prefix == rank) {
    l.emit.copy(src_base, 0, dst_base, 0, 1, static_cast<uint32_t>(in.elements()), isa::F32);
    return absl::OkStatus();
  }
  int suffix = rank;
  while (suffix > prefix && perm[static_cast<size_t>(suffix - 1)] == suffix - 1) --suffix;
  const int64_t split = perm[static_cast<size_t>(prefix)];
  for (int d = prefix; d < suffix; ++d) {
    const int64_t pos = d - prefix;
    const int64_t want = pos < suffix - split ? split + pos : prefix + pos - (suffix - split);
    if (perm[static_cast<size_t>(d)] != want) {
      return absl::UnimplementedError(
          str_cat("tpusim backend: transpose permutation [", str_join(perm, ", "),
                  "] is not a rotation between unchanged outer and inner dimensions"));
    }
  }
  const int64_t batch = product(in, 0, prefix), a = product(in, prefix, static_cast<int>(split)),
                c = product(in, static_cast<int>(split), suffix), inner = product(in, suffix, rank);
  if (transpose_in_vmem(l, src_base, dst_base, batch, a, c, inner)) return absl::OkStatus();
  if (inner > 1) {
    for (int64_t bi = 0; bi < batch; ++bi) {
      const uint64_t src = src_base + static_cast<uint64_t>(bi * a * c * inner) * 4;
      const uint64_t dst = dst_base + static_cast<uint64_t>(bi * a * c * inner) * 4;
      for (int64_t j = 0; j < c; ++j) {
        // Output rows j*a .. j*a+a take input block column j of every input row.
        l.emit.copy(
            src + static_cast<uint64_t>(j * inner) * 4, static_cast<uint64_t>(c * inner) * 4,
            dst + static_cast<uint64_t>(j * a * inner) * 4, static_cast<uint64_t>(inner) * 4,
            static_cast<uint64_t>(a), static_cast<uint32_t>(inner), isa::F32);
      }
    }
    return absl::OkStatus();
  }
  // For each batch: [a, c] -> [c, a], in tiles of input rows.
  const uint64_t budget = l.emit.tile_budget_bytes() / 2;
  const int64_t tile_rows =
      std::max<int64_t>(1, std::min<int64_t>(a, static_cast<int64_t>(budget / (c * 8))));
  for (int64_t bi = 0; bi < batch; ++bi) {
    const uint64_t src = src_base + static_cast<uint64_t>(bi * a * c) * 4;
    const uint64_t dst = dst_base + static_cast<uint64_t>(bi * a * c) * 4;
    for (int64_t r0 = 0; r0 < a; r0 += tile_rows) {
      const int64_t rows = std::min(tile_rows, a - r0);
      // Transpose the tile into a temporary, then place its columns with a strided copy.
      const uint64_t tmp = l.hbm.temporary(static_cast<uint64_t>(rows * c) * 4);
      l.emit.rowwise(tmp, static_cast<uint64_t>(c), static_cast<uint32_t>(rows), isa::F32,
                     {TileOperand{TileOperand::Kind::kRow, src + static_cast<uint64_t>(r0 * c) * 4,
                                  isa::F32, static_cast<uint32_t>(rows * c)}},
                     0, 0, [&](Tile& t) {
                       // The whole [rows, c] tile sits in the once-loaded row; this tile of the
                       // output takes columns first_row .. first_row + t.rows() of it.
                       isa::Block part =
                           block(t.in(0).address() + t.first_row() * 4, static_cast<uint32_t>(rows),
                                 t.rows(), isa::F32, static_cast<uint64_t>(c) * 4);
                       t.chain(t.e_builder().transpose(t.out(), part));
                     });
      l.emit.copy(tmp, static_cast<uint64_t>(rows) * 4, dst + static_cast<uint64_t>(r0) * 4,
                  static_cast<uint64_t>(a) * 4, static_cast<uint64_t>(c),
                  static_cast<uint32_t>(rows), isa::F32);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status emit_transpose(Lowering& l, uint64_t src, const Shape& in,
                            const std::vector<int64_t>& perm, uint64_t dst) {
  if (transpose_rotation_fits(perm)) return transpose_rotation(l, src, in, perm, dst);
  // Any other permutation: a sequence of swaps of adjacent dims (each a rotation of two dims
  // between an unchanged prefix and suffix), through temporaries.
  std::vector<int64_t> order(perm.size());
  std::iota(order.begin(), order.end(), 0);  // order[i]: the input dim now at position i
  Shape shape = in;
  uint64_t from = src;
  for (size_t target = 0; target < perm.size(); ++target) {
    size_t at =
        static_cast<size_t>(std::find(order.begin(), order.end(), perm[target]) - order.begin());
    while (at > target) {
      std::vector<int64_t> step(perm.size());
      std::iota(step.begin(), step.end(), 0);
      std::swap(step[at - 1], step[at]);
      std::vector<int64_t> dims = shape.dims();
      std::swap(dims[at - 1], dims[at]);
      const Shape next(dims);
      std::swap(order[at - 1], order[at]);
      --at;
      const bool last = order == perm;
      const uint64_t to = last ? dst : l.hbm.temporary(static_cast<uint64_t>(next.elements()) * 4);
      if (absl::Status s = transpose_rotation(l, from, shape, step, to); !s.ok()) return s;
      from = to;
      shape = next;
    }
  }
  return absl::OkStatus();
}

absl::Status lower_transpose(Lowering& l, int id) {
  const Node& n = l.node(id);
  return emit_transpose(l, l.address(n.inputs[0]), l.node(n.inputs[0]).shape, n.attrs.axes,
                        l.address(id));
}

absl::Status lower_concat(Lowering& l, int id) {
  const Node& n = l.node(id);
  const int axis = static_cast<int>(n.attrs.axis);
  const int64_t outer = product(n.shape, 0, axis),
                inner = product(n.shape, axis + 1, n.shape.rank());
  const int64_t total = n.shape.dim(axis);
  int64_t offset = 0;
  for (int in : n.inputs) {
    const int64_t part = l.node(in).shape.dim(axis);
    const uint64_t src = l.address(in),
                   dst = l.address(id) + static_cast<uint64_t>(offset * inner) * 4;
    if (static_cast<uint64_t>(part * inner) * 4 <= l.emit.tile_budget_bytes()) {
      // One row per outer index: the part's block, placed at its offset in the output row.
      l.emit.copy(src, static_cast<uint64_t>(part * inner) * 4, dst,
                  static_cast<uint64_t>(total * inner) * 4, static_cast<uint64_t>(outer),
                  static_cast<uint32_t>(part * inner), buffer_dtype(n));
    } else {
      for (int64_t o = 0; o < outer; ++o) {
        l.emit.copy(
            src + static_cast<uint64_t>(o * part * inner) * 4, static_cast<uint64_t>(inner) * 4,
            dst + static_cast<uint64_t>(o * total * inner) * 4, static_cast<uint64_t>(inner) * 4,
            static_cast<uint64_t>(part), static_cast<uint32_t>(inner), buffer_dtype(n));
      }
    }
    offset += part;
  }
  return absl::OkStatus();
}

namespace {

// Copies `box` (a shape) between two row-major tensors: element idx of the box is read at
// src_origin + idx and written at dst_origin + idx of the respective shapes. The last two
// dimensions go as one strided 2D copy per index of the leading ones.
void copy_box(Lowering& l, uint64_t src, const Shape& src_shape,
              const std::vector<int64_t>& src_origin, uint64_t dst, const Shape& dst_shape,
              const std::vector<int64_t>& dst_origin, const Shape& box, isa::DType dtype) {
  const int rank = box.rank();
  const auto ss = src_shape.strides(), ds = dst_shape.strides();
  const int64_t q = rank >= 1 ? box.dim(rank - 1) : 1;
  const int64_t p = rank >= 2 ? box.dim(rank - 2) : 1;
  const int64_t batch = box.elements() / std::max<int64_t>(1, p * q);
  const auto bs = box.strides();
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t so = 0, dof = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t idx = d < rank - 2 ? (bi * p * q / bs[static_cast<size_t>(d)]) % box.dim(d) : 0;
      so += (src_origin[static_cast<size_t>(d)] + idx) * ss[static_cast<size_t>(d)];
      dof += (dst_origin[static_cast<size_t>(d)] + idx) * ds[static_cast<size_t>(d)];
    }
    const uint64_t src_stride =
        rank >= 2 ? static_cast<uint64_t>(ss[static_cast<size_t>(rank - 2)]) * 4 : 0;
    const uint64_t dst_stride =
        rank >= 2 ? static_cast<uint64_t>(ds[static_cast<size_t>(rank - 2)]) * 4 : 0;
    l.emit.copy(src + static_cast<uint64_t>(so) * 4, src_stride,
                dst + static_cast<uint64_t>(dof) * 4, dst_stride, static_cast<uint64_t>(p),
                static_cast<uint32_t>(q), dtype);
  }
}

}  // namespace

absl::Status lower_slice(Lowering& l, int id) {
  const Node& n = l.node(id);
  copy_box(l, l.address(n.inputs[0]), l.node(n.inputs[0]).shape, n.attrs.begin, l.address(id),
           n.shape, std::vector<int64_t>(static_cast<size_t>(n.shape.rank()), 0), n.shape,
           buffer_dtype(n));
  return absl::OkStatus();
}

absl::Status lower_pad(Lowering& l, int id) {
  const Node& n = l.node(id);
  const Shape& in = l.node(n.inputs[0]).shape;
  const uint32_t cols =
      n.shape.rank() == 0 ? 1 : static_cast<uint32_t>(n.shape.dim(n.shape.rank() - 1));
  l.emit.rowwise(l.address(id), static_cast<uint64_t>(n.shape.elements()) / cols, cols,
                 buffer_dtype(n), {}, 0, 0,
                 [](Tile& t) { t.chain(t.e_builder().fill(t.out(), 0)); });
  copy_box(l, l.address(n.inputs[0]), in, std::vector<int64_t>(static_cast<size_t>(in.rank()), 0),
           l.address(id), n.shape, n.attrs.begin, in, buffer_dtype(n));
  return absl::OkStatus();
}

int transposed_lhs_source(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kMatMul) return -1;
  const Node& lhs = graph.node(n.inputs[0]);
  const Shape& w = graph.node(n.inputs[1]).shape;
  if (lhs.op != Op::kTranspose || lhs.shape.rank() != 2 || w.rank() != 2) return -1;
  const int64_t m = lhs.shape.dim(0), k = lhs.shape.dim(1), cols = w.dim(1);
  return k * cols + m * cols < k * m ? lhs.inputs[0] : -1;
}

std::vector<int> operands_read(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  const int source = transposed_lhs_source(graph, id);
  if (source < 0) return n.inputs;
  return {source, n.inputs[1]};
}

namespace {

// One GEMM c = a b of row-major matrices in HBM, a being rows x k and b k x cols; c's tiles
// rounded to bf16 values on their way out when `round_bf16`.
absl::Status emit_hbm_gemm(Lowering& l, uint64_t a, uint64_t b, uint64_t c, uint32_t rows,
                           uint32_t k, uint32_t cols, bool round_bf16) {
  GemmContext ctx;
  ctx.builder = &l.emit.builder();
  ctx.flags = &l.emit.flags();
  ctx.flag_ids = l.gemm_flags;
  ctx.before_read = [&](sim::InstrRef& r) { l.emit.ordered(r); };
  ctx.after_write = [&](sim::InstrRef& r) { l.emit.wrote_hbm(r); };
  ctx.round_to_bf16 = round_bf16;
  l.emit.begin_fragment();
  GemmLayout layout;
  layout.a_address = a;
  layout.b_address = b;
  layout.c_address = c;
  layout.input_dtype = isa::F32;
  return emit_gemm(l.emit.core(), {rows, k, cols}, l.precision, layout, ctx).status();
}

// A^T W as (W^T A)^T (see transposed_lhs_source), A at `a` (k x m), W at `w` (k x cols).
absl::Status lower_transposed_lhs_matmul(Lowering& l, int id, uint64_t a, int64_t k, int64_t m,
                                         uint64_t w, int64_t cols, bool round_bf16) {
  const uint64_t w_t = l.hbm.temporary(static_cast<uint64_t>(cols * k) * 4);
  const uint64_t product = l.hbm.temporary(static_cast<uint64_t>(cols * m) * 4);
  if (absl::Status s = emit_transpose(l, w, Shape({k, cols}), {1, 0}, w_t); !s.ok()) return s;
  if (absl::Status s =
          emit_hbm_gemm(l, w_t, a, product, static_cast<uint32_t>(cols), static_cast<uint32_t>(k),
                        static_cast<uint32_t>(m), round_bf16);
      !s.ok()) {
    return s;
  }
  return emit_transpose(l, product, Shape({cols, m}), {1, 0}, l.address(id));
}

// A batch of GEMMs with no operand shared ([batches, m, k] x [batches, k, cols], attention's
// scores and their gradients) as one fragment over tiles of whole batch entries: per entry, an
// MXU loads its weights and streams its rows, the entries going round the MXUs. False (nothing
// emitted) when one entry's operands and product do not fit a tile.
bool batched_matmul_in_vmem(Lowering& l, uint64_t a, uint64_t w, uint64_t c, int64_t batches,
                            uint32_t m, uint32_t k, uint32_t cols, bool round_bf16) {
  const uint64_t a_cols = uint64_t{m} * k, w_cols = uint64_t{k} * cols, c_cols = uint64_t{m} * cols;
  if (std::max({a_cols, w_cols, c_cols}) > UINT32_MAX ||
      Emitter::tile_bytes({a_cols, w_cols, c_cols}, 1) > l.emit.tile_budget_bytes())
    return false;
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  l.emit.rowwise(
      c, static_cast<uint64_t>(batches), static_cast<uint32_t>(c_cols), isa::F32,
      {TileOperand{TileOperand::Kind::kFull, a, isa::F32, static_cast<uint32_t>(a_cols)},
       TileOperand{TileOperand::Kind::kFull, w, isa::F32, static_cast<uint32_t>(w_cols)}},
      0, 0, [&](Tile& t) {
        for (uint64_t e = 0; e < t.rows(); ++e) {
          emit_mxu_product(
              l.emit.core(), t.e_builder(),
              block(t.in(0).address() + e * a_cols * 4, m, k, isa::F32),
              block(t.in(1).address() + e * w_cols * 4, k, cols, isa::F32),
              block(t.out().address() + e * c_cols * 4, m, cols, isa::F32), false, l.precision,
              next_slot, [&](sim::InstrRef& load) { t.after_loads(load); },
              // Each MXU runs in order, so its load_weights waiting for the tile's
              // loads is enough; the tile's store waits for every product.
              [&](sim::InstrRef& mm, bool) { t.fan_out(mm, 0); });
        }
        if (round_bf16) {  // after every product: the store waits for the chain
          t.chain(t.join(t.e_builder().unary(isa::Vector::ROUND_BF16, t.out(), t.out())));
        }
      });
  return true;
}

}  // namespace

absl::Status lower_matmul(Lowering& l, int id) {
  const Node& n = l.node(id);
  // A bf16 product is rounded in VMEM before it leaves, on every path below.
  const bool round_bf16 = n.dtype == DType::kBF16;
  l.output_rounded = round_bf16;
  if (const int source = transposed_lhs_source(l.graph, id); source >= 0) {
    const Shape& a = l.node(source).shape;
    return lower_transposed_lhs_matmul(l, id, l.address(source), a.dim(0), a.dim(1),
                                       l.address(n.inputs[1]), l.node(n.inputs[1]).shape.dim(1),
                                       round_bf16);
  }
  const Shape& a = l.node(n.inputs[0]).shape;
  const Shape& w = l.node(n.inputs[1]).shape;
  const auto m = static_cast<uint32_t>(a.dim(a.rank() - 2)),
             k = static_cast<uint32_t>(a.dim(a.rank() - 1)),
             cols = static_cast<uint32_t>(w.dim(w.rank() - 1));
  const bool shared = w.rank() == 2;
  const int64_t batches = a.elements() / (int64_t{m} * k);
  const int64_t gemms = shared ? 1 : batches;
  const uint32_t rows = shared ? static_cast<uint32_t>(batches * m) : m;
  if (!shared && batches > 1 &&
      batched_matmul_in_vmem(l, l.address(n.inputs[0]), l.address(n.inputs[1]), l.address(id),
                             batches, m, k, cols, round_bf16))
    return absl::OkStatus();
  for (int64_t bi = 0; bi < gemms; ++bi) {
    const auto at = static_cast<uint64_t>(bi);
    if (absl::Status s = emit_hbm_gemm(
            l, l.address(n.inputs[0]) + at * m * k * 4, l.address(n.inputs[1]) + at * k * cols * 4,
            l.address(id) + at * m * cols * 4, rows, k, cols, round_bf16);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
