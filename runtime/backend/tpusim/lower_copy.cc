// Lowering of concat, slice and pad: strided copies of boxes between row-major tensors.
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

absl::Status lower_concat(Lowering& l, int id) {
  const Node& n = l.node(id);
  const int axis = static_cast<int>(n.attrs.axis);
  const int64_t outer = dims_product(n.shape, 0, axis),
                inner = dims_product(n.shape, axis + 1, n.shape.rank());
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

}  // namespace tpusim::runtime::tpusim_backend
