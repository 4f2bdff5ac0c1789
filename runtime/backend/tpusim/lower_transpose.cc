// Lowering of transposes: rotations in VMEM or by strided copies, any permutation as a sequence
// of them.
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
  const int64_t batch = dims_product(in, 0, prefix),
                a = dims_product(in, prefix, static_cast<int>(split)),
                c = dims_product(in, static_cast<int>(split), suffix),
                inner = dims_product(in, suffix, rank);
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

}  // namespace tpusim::runtime::tpusim_backend
