// Lowering of matmuls: GEMMs through the MXUs, batched GEMMs of whole entries in VMEM, and
// operands that are transposes of their last two axes read as their inputs lie, transposed in
// VMEM (XLA's TransposeFolding).
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

int folded_transpose_source(const Graph& graph, int id, int operand) {
  const Node& n = graph.node(id);
  if (n.op != Op::kMatMul) return -1;
  const Node& t = graph.node(n.inputs[static_cast<size_t>(operand)]);
  const int r = t.shape.rank();
  if (t.op != Op::kTranspose || r < 2) return -1;
  const std::vector<int64_t>& perm = t.attrs.axes;
  for (int i = 0; i + 2 < r; ++i) {
    if (perm[static_cast<size_t>(i)] != i) return -1;
  }
  if (perm[static_cast<size_t>(r - 2)] != r - 1 || perm[static_cast<size_t>(r - 1)] != r - 2)
    return -1;
  if (operand == 0 && r != 2 && graph.node(n.inputs[1]).shape.rank() == 2) return -1;
  return t.inputs[0];
}

BufferUses matmul_uses(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  BufferUses uses{{}, {id}};
  for (int operand = 0; operand < 2; ++operand) {
    const int source = folded_transpose_source(graph, id, operand);
    uses.reads.push_back(source >= 0 ? source : n.inputs[static_cast<size_t>(operand)]);
  }
  return uses;
}

namespace {

// One GEMM c = a b of row-major matrices in HBM, a being rows x k and b k x cols (each stored
// transposed as `transposes` says); c's tiles rounded to bf16 values on their way out when
// `round_bf16`.
absl::Status emit_hbm_gemm(Lowering& l, uint64_t a, uint64_t b, uint64_t c, uint32_t rows,
                           uint32_t k, uint32_t cols, GemmTransposes transposes, bool round_bf16) {
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
  layout.transposes = transposes;
  return emit_gemm(l.emit.chip(), {rows, k, cols}, l.precision, layout, ctx).status();
}

// A batch of GEMMs with no operand shared ([batches, m, k] x [batches, k, cols], attention's
// scores and their gradients) as one fragment over tiles of whole batch entries: per entry, an
// MXU loads its weights and streams its rows, the entries going round the MXUs. An operand stored
// transposed (`transposes`) is loaded as it lies and each entry transposed into a scratch row by
// the vector unit, whose chain the entry's MXU work waits for. False (nothing emitted) when one
// entry's operands, product and scratch do not fit a tile.
bool batched_matmul_in_vmem(Lowering& l, uint64_t a, uint64_t w, uint64_t c, int64_t batches,
                            uint32_t m, uint32_t k, uint32_t cols, GemmTransposes transposes,
                            bool round_bf16) {
  const uint64_t a_cols = uint64_t{m} * k, w_cols = uint64_t{k} * cols, c_cols = uint64_t{m} * cols;
  std::vector<uint64_t> widths{a_cols, w_cols, c_cols};
  const uint64_t scratch_width =
      std::max(transposes.a ? a_cols : uint64_t{0}, transposes.b ? w_cols : uint64_t{0});
  const uint32_t scratch = (transposes.a ? 1 : 0) + (transposes.b ? 1 : 0);
  widths.insert(widths.end(), scratch, scratch_width);
  if (std::max({a_cols, w_cols, c_cols}) > UINT32_MAX ||
      Emitter::tile_bytes(widths, 1) > l.emit.tile_budget_bytes())
    return false;
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  l.emit.rowwise(
      c, static_cast<uint64_t>(batches), static_cast<uint32_t>(c_cols), isa::F32,
      {TileOperand{TileOperand::Kind::kFull, a, isa::F32, static_cast<uint32_t>(a_cols)},
       TileOperand{TileOperand::Kind::kFull, w, isa::F32, static_cast<uint32_t>(w_cols)}},
      scratch, static_cast<uint32_t>(scratch_width), [&](Tile& t) {
        for (uint64_t e = 0; e < t.rows(); ++e) {
          isa::Block lhs = block(t.in(0).address() + e * a_cols * 4, m, k, isa::F32);
          isa::Block weights = block(t.in(1).address() + e * w_cols * 4, k, cols, isa::F32);
          // Entry e's row of scratch j, as a rows x cols matrix, holding `stored` transposed.
          size_t j = 0;
          auto transposed = [&](const isa::Block& stored) {
            const isa::Block row = t.scratch(j++, static_cast<uint32_t>(scratch_width));
            const isa::Block into = block(row.address() + e * scratch_width * 4, stored.cols(),
                                          stored.rows(), isa::F32);
            t.chain(t.e_builder().transpose(into, stored));
            return into;
          };
          if (transposes.a) lhs = transposed(block(lhs.address(), k, m, isa::F32));
          if (transposes.b) weights = transposed(block(weights.address(), cols, k, isa::F32));
          // With nothing transposed the MXU work waits for the tile's loads alone (each MXU runs
          // in order, so its load_weights waiting is enough); otherwise for the chain.
          const uint64_t after = scratch > 0 ? t.chain_count() : 0;
          emit_mxu_product(
              l.emit.core(), t.e_builder(), lhs, weights,
              block(t.out().address() + e * c_cols * 4, m, cols, isa::F32), false, l.precision,
              next_slot,
              [&](sim::InstrRef& load) {
                if (after > 0)
                  t.fan_out(load, after);
                else
                  t.after_loads(load);
              },
              // The tile's store waits for every product.
              [&](sim::InstrRef& mm, bool) { t.fan_out(mm, after); });
        }
        if (round_bf16) {  // after every product: the store waits for the chain
          round_bf16_in_tile(t, t.out(), true);
        }
      });
  return true;
}

}  // namespace

absl::Status lower_matmul(Lowering& l, int id) {
  const Node& n = l.node(id);
  // A bf16 product is rounded in VMEM before it leaves, on every path below.
  const bool round_bf16 = n.dtype == DType::kBF16;
  const int a_source = folded_transpose_source(l.graph, id, 0),
            w_source = folded_transpose_source(l.graph, id, 1);
  const GemmTransposes transposes{a_source >= 0, w_source >= 0};
  const uint64_t a_at = l.address(a_source >= 0 ? a_source : n.inputs[0]),
                 w_at = l.address(w_source >= 0 ? w_source : n.inputs[1]);
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
      batched_matmul_in_vmem(l, a_at, w_at, l.address(id), batches, m, k, cols, transposes,
                             round_bf16))
    return absl::OkStatus();
  for (int64_t bi = 0; bi < gemms; ++bi) {
    const auto at = static_cast<uint64_t>(bi);
    if (absl::Status s =
            emit_hbm_gemm(l, a_at + at * m * k * 4, w_at + at * k * cols * 4,
                          l.address(id) + at * m * cols * 4, rows, k, cols, transposes, round_bf16);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
