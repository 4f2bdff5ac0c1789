// Lowering of broadcasts: inserted runs of repeated dims as strided copies, anything else as
// one [P, Q] block per index of the leading dims.
#include <algorithm>
#include <map>
#include <numeric>

#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// A broadcast whose repeated output dims form one contiguous run [first, last) between dims the
// input fills in order: out = [outer, k, inner], in = [outer, inner]. Fills `dims` and returns
// true when that is the case.
bool insert_block(const Shape& in, const std::vector<int64_t>& map, const Shape& out,
                  int64_t* outer, int64_t* k, int64_t* inner) {
  std::vector<bool> mapped(static_cast<size_t>(out.rank()), false);
  for (size_t i = 0; i < map.size(); ++i) {
    if (in.dim(static_cast<int>(i)) != out.dim(static_cast<int>(map[i])))
      return false;  // a stretched size-1 dim
    mapped[static_cast<size_t>(map[i])] = true;
  }
  int first = -1, last = -1;
  for (int d = 0; d < out.rank(); ++d) {
    if (mapped[static_cast<size_t>(d)]) continue;
    if (first < 0)
      first = d;
    else if (last != d)
      return false;  // a second run
    last = d + 1;
  }
  if (first < 0) return false;
  *outer = 1, *k = 1, *inner = 1;
  for (int d = 0; d < out.rank(); ++d) (d < first ? *outer : d < last ? *k : *inner) *= out.dim(d);
  return true;
}

}  // namespace

void emit_broadcast(Lowering& l, uint64_t src, const Shape& in, const std::vector<int64_t>& map,
                    const Shape& out, uint64_t dst) {
  int64_t outer = 0, k = 0, inner = 0;
  if (insert_block(in, map, out, &outer, &k, &inner) && (outer == 1 || inner * k <= (1 << 20))) {
    // out [outer, k * inner]: row broadcast (outer 1), column broadcast (inner 1), or k copies
    // of each input row into strided slices.
    const auto width = static_cast<uint32_t>(k * inner);
    if (outer == 1) {
      l.emit.rowwise(dst, static_cast<uint64_t>(k), static_cast<uint32_t>(inner), isa::F32,
                     {TileOperand{TileOperand::Kind::kRow, src, isa::F32}}, 0, 0,
                     [](Tile& t) { t.chain(t.e_builder().broadcast(t.out(), t.in(0))); });
    } else if (inner == 1) {
      l.emit.rowwise(dst, static_cast<uint64_t>(outer), width, isa::F32,
                     {TileOperand{TileOperand::Kind::kColumn, src, isa::F32}}, 0, 0,
                     [](Tile& t) { t.chain(t.e_builder().broadcast(t.out(), t.in(0))); });
    } else {
      l.emit.rowwise(
          dst, static_cast<uint64_t>(outer), width, isa::F32,
          {TileOperand{TileOperand::Kind::kFull, src, isa::F32, static_cast<uint32_t>(inner)}}, 0,
          0, [&](Tile& t) {
            for (int64_t j = 0; j < k; ++j) {
              const isa::Block slice =
                  block(t.out().address() + static_cast<uint64_t>(j * inner) * 4, t.rows(),
                        static_cast<uint32_t>(inner), isa::F32, static_cast<uint64_t>(width) * 4);
              t.chain(t.e_builder().unary(Vector::COPY, slice, t.in(0)));
            }
          });
    }
    return;
  }
  emit_broadcast_general(l, src, in, map, out, dst);
}

void emit_broadcast_general(Lowering& l, uint64_t src, const Shape& in,
                            const std::vector<int64_t>& map, const Shape& out, uint64_t dst) {
  // Output as [batch, P, Q]; the input contributes a [P', Q'] block per batch index.
  const int rank = out.rank();
  const int64_t q = rank >= 1 ? out.dim(rank - 1) : 1;
  const int64_t p = rank >= 2 ? out.dim(rank - 2) : 1;
  const int64_t batch = out.elements() / std::max<int64_t>(1, p * q);
  const auto in_strides = in.strides();
  int64_t p_in = 1, q_in = 1, p_stride = 0;
  std::vector<std::pair<int, int64_t>>
      batch_dims;  // (output dim, input stride) of mapped batch dims
  for (size_t i = 0; i < map.size(); ++i) {
    const int d = static_cast<int>(map[i]);
    const int64_t size = in.dim(static_cast<int>(i));
    if (size == 1) continue;
    if (d == rank - 1)
      q_in = size;
    else if (d == rank - 2) {
      p_in = size;
      p_stride = in_strides[i];
    } else {
      batch_dims.emplace_back(d, in_strides[i]);
    }
  }
  const auto out_strides = out.strides();
  for (int64_t bi = 0; bi < batch; ++bi) {
    // The batch index's input offset.
    int64_t offset = 0;
    for (const auto& [d, stride] : batch_dims) {
      const int64_t idx = (bi * p * q / out_strides[static_cast<size_t>(d)]) % out.dim(d);
      offset += idx * stride;
    }
    const uint64_t from = src + static_cast<uint64_t>(offset) * 4;
    const uint64_t to = dst + static_cast<uint64_t>(bi * p * q) * 4;
    // One [p, q] output block from the input's [p_in, q_in] block: gathered into a temporary
    // with its own stride, then broadcast by a row-tiled fragment.
    const uint64_t packed = l.hbm.temporary(static_cast<uint64_t>(p_in * q_in) * 4);
    l.emit.copy(from, static_cast<uint64_t>(p_stride) * 4, packed, static_cast<uint64_t>(q_in) * 4,
                static_cast<uint64_t>(p_in), static_cast<uint32_t>(q_in), isa::F32);
    TileOperand operand{TileOperand::Kind::kFull, packed, isa::F32};
    if (p_in == 1 && q_in == q) operand.kind = TileOperand::Kind::kRow;
    if (p_in == p && q_in == 1) operand.kind = TileOperand::Kind::kColumn;
    if (p_in == 1 && q_in == 1) {
      operand.kind = TileOperand::Kind::kRow;
      operand.cols = 1;
    }
    const bool scalar = p_in == 1 && q_in == 1;
    l.emit.rowwise(to, static_cast<uint64_t>(p), static_cast<uint32_t>(q), isa::F32, {operand}, 1,
                   1, [&](Tile& t) {
                     sim::CoreBuilder& b = t.e_builder();
                     if (operand.kind == TileOperand::Kind::kFull) {
                       t.chain(b.unary(Vector::COPY, t.out(), t.in(0)));
                     } else if (scalar) {
                       t.chain(b.broadcast(t.scratch(0, 1), t.in(0)));  // [1,1] -> [rows, 1]
                       t.chain(b.broadcast(t.out(), t.scratch(0, 1)));  // -> [rows, q]
                     } else {
                       t.chain(b.broadcast(t.out(), t.in(0)));
                     }
                   });
  }
}

absl::Status lower_broadcast(Lowering& l, int id) {
  const Node& n = l.node(id);
  emit_broadcast(l, l.address(n.inputs[0]), l.node(n.inputs[0]).shape, n.attrs.axes, n.shape,
                 l.address(id));
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
