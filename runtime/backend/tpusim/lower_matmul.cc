// Lowering of matmuls: GEMMs through the MXUs, a transposed lhs computed as (W^T A)^T, batched
// GEMMs of whole entries in VMEM.
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

int transposed_lhs_source(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kMatMul) return -1;
  const Node& lhs = graph.node(n.inputs[0]);
  const Shape& w = graph.node(n.inputs[1]).shape;
  if (lhs.op != Op::kTranspose || lhs.shape.rank() != 2 || w.rank() != 2) return -1;
  const int64_t m = lhs.shape.dim(0), k = lhs.shape.dim(1), cols = w.dim(1);
  return k * cols + m * cols < k * m ? lhs.inputs[0] : -1;
}

BufferUses matmul_uses(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  const int source = transposed_lhs_source(graph, id);
  if (source < 0) return reads_inputs_writes_self(graph, id);
  return {{source, n.inputs[1]}, {id}};
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
  return emit_gemm(l.emit.chip(), {rows, k, cols}, l.precision, layout, ctx).status();
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
