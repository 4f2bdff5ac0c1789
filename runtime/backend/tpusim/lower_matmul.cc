// Lowering of matmuls: GEMMs through the MXUs and batched GEMMs of whole entries in VMEM, their
// operands read where they lie through the transposes before them (matmul_views.cc: slices
// transposed in VMEM, a split of heads read entry by entry), a product whose heads are merged
// stored where the merge puts each entry.
#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "common/strings.h"
#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_lowering.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// One GEMM c = a b of row-major matrices in HBM, a being rows x k and b k x cols (each stored
// transposed as `transposes` says); c's tiles rounded to bf16 values on their way out when
// `round_bf16`.
absl::Status emit_hbm_gemm(Lowering& l, uint64_t a, uint64_t b, uint64_t c, uint32_t rows,
                           uint32_t k, uint32_t cols, GemmTransposes transposes,
                           std::array<uint64_t, 3> row_elements, bool round_bf16) {
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
  layout.row_elements = row_elements;
  return emit_gemm(l.emit.chip(), {rows, k, cols}, l.precision, layout, ctx).status();
}

// A batched matmul's geometry: [batches, m, k] x [batches, k, cols], each operand read as its view
// says (matmul_operand_view: stored transposed, its entries interleaved); an entry's elements of
// each operand and product.
struct BatchedGeometry {
  uint32_t m = 0, k = 0, cols = 0;
  int64_t batches = 0;
  bool shared = false;  // the rhs is 2D weights every entry shares: not a batched product
  std::array<MatmulOperandView, 2> views;
  GemmTransposes transposes;
  std::array<uint64_t, 2> operand_cols{};  // a's m k, w's k cols
  uint64_t c_cols = 0;
  // Where operand i's entry e starts in its source's buffer, in bytes.
  uint64_t entry_at(size_t i, uint64_t e) const {
    const MatmulOperandView& v = views[i];
    if (v.heads == 0) return e * operand_cols[i] * 4;
    return TileOperand::Entries::of_heads(v.heads, static_cast<uint32_t>(v.rows),
                                          static_cast<uint32_t>(v.cols))
        .at(e);
  }
  // Elements from one of operand i's stored rows to the next: 0 when they are dense.
  uint64_t row_elements(size_t i) const { return views[i].heads * views[i].cols; }
};
BatchedGeometry batched_geometry(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  const Shape& a = graph.node(n.inputs[0]).shape;
  const Shape& w = graph.node(n.inputs[1]).shape;
  BatchedGeometry g;
  g.m = static_cast<uint32_t>(a.dim(a.rank() - 2));
  g.k = static_cast<uint32_t>(a.dim(a.rank() - 1));
  g.cols = static_cast<uint32_t>(w.dim(w.rank() - 1));
  g.shared = w.rank() == 2;
  g.batches = a.elements() / (int64_t{g.m} * g.k);
  g.views = {matmul_operand_view(graph, id, 0), matmul_operand_view(graph, id, 1)};
  g.transposes = {g.views[0].transposed, g.views[1].transposed};
  g.operand_cols = {uint64_t{g.m} * g.k, uint64_t{g.k} * g.cols};
  g.c_cols = uint64_t{g.m} * g.cols;
  return g;
}

// The scratch blocks of a batched tile that an operand takes: one made by its group, its value
// and the group's blocks, the first of which (dead once the value is made) takes the operand's
// entries transposed when it is stored transposed; one loaded, a block for those when it is.
uint32_t operand_scratch(bool made, uint32_t blocks, bool transposed) {
  if (!made) return transposed ? 1 : 0;
  return 1 + std::max(blocks, transposed ? 1u : 0u);
}

// A batched tile's blocks of one entry: each operand's loaded values (its making's images, or the
// operand), a consumer's, the product; and its scratch blocks, each as wide as an entry of what
// it holds: each operand's (operand_scratch), then a consumer's (the product's and the group's),
// one after the other in the tile's scratch region (`first`: where each of the three's start).
struct BatchedWidths {
  std::vector<uint64_t> loaded;
  std::vector<uint64_t> scratch;
  std::array<size_t, 3> first{};
  uint64_t scratch_total() const {
    return std::accumulate(scratch.begin(), scratch.end(), uint64_t{0});
  }
  // Scratch block j of tile t: [rows, scratch[j]].
  isa::Block scratch_block(const Tile& t, size_t j) const {
    const uint64_t before = std::accumulate(scratch.begin(), scratch.begin() + j, uint64_t{0});
    const uint64_t base = t.scratch(0, static_cast<uint32_t>(scratch_total())).address();
    return block(base + t.rows() * before * 4, t.rows(), static_cast<uint32_t>(scratch[j]),
                 isa::F32);
  }
};
BatchedWidths batched_widths(const BatchedGeometry& g,
                             const std::array<MatmulOperandMaking, 2>& making,
                             std::optional<MatmulOperandMaking> consumer) {
  BatchedWidths out;
  const std::array<bool, 2> transposed{g.transposes.a, g.transposes.b};
  for (size_t i = 0; i < 2; ++i) {
    const bool made = making[i].images > 0;
    out.loaded.insert(out.loaded.end(), made ? making[i].images : 1, g.operand_cols[i]);
    out.first[i] = out.scratch.size();
    out.scratch.insert(out.scratch.end(), operand_scratch(made, making[i].blocks, transposed[i]),
                       g.operand_cols[i]);
  }
  out.first[2] = out.scratch.size();
  if (consumer) {  // its loaded values, the product's block and its own
    out.loaded.insert(out.loaded.end(), consumer->images, g.c_cols);
    out.scratch.insert(out.scratch.end(), 1 + consumer->blocks, g.c_cols);
  }
  out.loaded.push_back(g.c_cols);
  return out;
}

bool fits_tile(const BatchedWidths& w, uint64_t tile_budget) {
  std::vector<uint64_t> widths = w.loaded;
  widths.insert(widths.end(), w.scratch.begin(), w.scratch.end());
  return w.scratch_total() <= UINT32_MAX &&
         *std::max_element(widths.begin(), widths.end()) <= UINT32_MAX &&
         Emitter::tile_bytes(widths, 1) <= tile_budget;
}

// An operand of a batched matmul as its tile gets it: loaded as it lies, or made in VMEM by the
// elementwise group that computes it, recomputed there instead of read (XLA fuses an elementwise
// producer into the dot that reads it); then transposed entry by entry into a scratch block when
// it is stored transposed.
struct BatchedOperand {
  TileOperand loaded;        // when no group makes it
  std::vector<int> members;  // the group making it, its root (the operand) last
  GroupOperands ops;         // the group's loaded values, an entry a row
  GroupScratch scratch;      // and its blocks
  bool transposed = false;
  uint64_t cols = 0;         // an entry's elements
  size_t first_input = 0;    // its first tile operand
  size_t first_scratch = 0;  // its first scratch block
  bool made() const { return !members.empty(); }
  MatmulOperandMaking making() const {
    return made() ? MatmulOperandMaking{ops.tiles.size(), scratch.blocks} : MatmulOperandMaking{};
  }
};
BatchedOperand batched_operand(Lowering& l, const BatchedGeometry& g, size_t i) {
  const MatmulOperandView& view = g.views[i];
  const int source = view.source;
  const uint64_t cols = g.operand_cols[i];
  BatchedOperand o;
  o.transposed = view.transposed;
  o.cols = cols;
  // The fusion plan makes no operand whose entries are interleaved (matmul_recomputes).
  if (view.heads == 0 && l.fusion != nullptr && l.fusion->node(source).recomputed) {
    o.members = l.fusion->members(source);
    o.ops = group_operands(l, o.members, l.node(source).shape);
    for (TileOperand& t : o.ops.tiles) t.cols = static_cast<uint32_t>(cols);  // an entry a row
    o.scratch = plan_scratch(l, o.members, o.ops, {}, true);
  } else {
    o.loaded = TileOperand{TileOperand::Kind::kFull, l.address(source), isa::F32,
                           static_cast<uint32_t>(cols)};
    if (view.heads > 0) {  // each entry by a DMA of its own, its rows apart
      o.loaded.entries = TileOperand::Entries::of_heads(
          view.heads, static_cast<uint32_t>(view.rows), static_cast<uint32_t>(view.cols));
    }
  }
  return o;
}

// The tile's values of operand `o`, [rows, cols], its group's steps appended to `chain`.
isa::Block operand_in_tile(Lowering& l, Tile& t, const BatchedWidths& w, const BatchedOperand& o,
                           sim::VectorChain& chain) {
  if (!o.made()) return t.in(o.first_input);
  const isa::Block value = w.scratch_block(t, o.first_scratch);
  const GroupBlocks blocks{[&](size_t slot) { return t.in(o.first_input + slot); },
                           [&](size_t j) { return w.scratch_block(t, o.first_scratch + 1 + j); },
                           [&] { return value; },
                           {}};  // no rng_uniform member: its group is never recomputed
  compute_group(l, o.members, o.ops, o.scratch, blocks, value, chain);
  return value;
}

// An elementwise group consuming a batched product in its tile (a consumer taken in,
// fusion_plan.h): the product made into a scratch block, the group computed from it and its
// other values into the tile's output, which is the group's value. Values of the product's shape
// are loaded with the tile, an entry a row; narrower ones once above the tile slots: a scalar, a
// row of the product's last axis, or all of a value one row of which serves every `row_period`
// rows of the product's [rows, cols] view (BERT's attention mask over heads and queries).
struct BatchedConsumer {
  std::vector<int> members;  // the group, its root last; none: the product itself is stored
  GroupOperands ops;         // the product given (no load), then its other values
  GroupScratch scratch;
  int product = -1;
  std::map<size_t, size_t> loaded_at;  // its slots but the product's -> their tile operands
  size_t first_scratch = 0;            // the product's block; the group's follow
  bool narrow = false;                 // it reads a value loaded once
  bool present() const { return !members.empty(); }
  std::optional<MatmulOperandMaking> making() const {
    if (!present()) return std::nullopt;
    const auto full = static_cast<size_t>(
        std::count_if(ops.tiles.begin(), ops.tiles.end(),
                      [](const TileOperand& t) { return t.kind == TileOperand::Kind::kFull; }));
    return MatmulOperandMaking{full - 1, scratch.blocks};
  }
};
BatchedConsumer batched_consumer(Lowering& l, int product, const std::vector<int>& members,
                                 const BatchedGeometry& g) {
  BatchedConsumer c;
  if (members.empty()) return c;
  c.members = members;
  c.product = product;
  const Shape& shape = l.node(product).shape;
  c.ops = group_operands(l, members, shape, {}, true, {product});
  for (const auto& [node, slot] : c.ops.slot) {
    TileOperand& t = c.ops.tiles[slot];
    if (c.ops.periodic[slot]) {  // all of it: an entry's row is picked in the tile
      t.cols = static_cast<uint32_t>(l.node(node).shape.elements());
    } else {  // an entry a row, or a row of the last axis
      t.cols = t.kind == TileOperand::Kind::kFull ? static_cast<uint32_t>(g.c_cols) : g.cols;
    }
    c.narrow = c.narrow || t.loaded_once();
  }
  c.scratch = plan_scratch(l, members, c.ops, {}, true);
  return c;
}

// Appends the consumer's loads to `loads` (its operands' tiles but the product's) and notes
// where each slot's lands.
void add_consumer_loads(BatchedConsumer& c, std::vector<TileOperand>& loads) {
  for (const auto& [node, slot] : c.ops.slot) {
    if (node == c.product) continue;
    c.loaded_at.emplace(slot, loads.size());
    loads.push_back(c.ops.tiles[slot]);
  }
}

// The group's chain over entries [first, first + n) of tile `t`, each block of the tile viewed as
// [entries x m, cols] (an entry's elements are its m rows of cols): `product`'s and the tile's
// rows, a row-periodic value's row for those entries, which share it.
sim::VectorChain consume_entries(Lowering& l, Tile& t, const BatchedGeometry& g,
                                 const BatchedWidths& w, const BatchedConsumer& c,
                                 const isa::Block& product, uint64_t first, uint64_t n) {
  auto rows = [&](const isa::Block& b) {
    return block(b.address() + first * g.c_cols * 4, static_cast<uint32_t>(n * g.m), g.cols,
                 isa::F32);
  };
  const size_t product_slot = c.ops.slot.at(c.product);
  const uint64_t period =
      c.ops.row_period > 0 ? (t.first_row() + first) * g.m / c.ops.row_period : 0;
  const GroupBlocks blocks{
      [&](size_t slot) {
        if (slot == product_slot) return rows(product);
        const isa::Block in = t.in(c.loaded_at.at(slot));
        if (c.ops.periodic[slot])
          return block(in.address() + period * g.cols * 4, 1, g.cols, isa::F32);
        return c.ops.tiles[slot].loaded_once() ? in : rows(in);
      },
      [&](size_t j) { return rows(w.scratch_block(t, c.first_scratch + 1 + j)); },
      [&] { return rows(t.out()); },
      {}};  // no rng_uniform member (the fusion plan takes in none)
  sim::VectorChain chain;
  compute_group(l, c.members, c.ops, c.scratch, blocks, rows(t.out()), chain);
  return chain;
}

// The consumer's value in the tile's output from the products in `product` (rounded to bf16
// first when the product is bf16, as its own fragment would store it), after every product: the
// whole tile at once, or, reading a value loaded once, the tile's entries viewed as their rows,
// a chain per run of entries sharing a row-periodic value's row.
void consume_in_tile(Lowering& l, Tile& t, const BatchedGeometry& g, const BatchedWidths& w,
                     const BatchedConsumer& c, const isa::Block& product, bool round_bf16) {
  if (round_bf16) round_bf16_in_tile(t, product, true);
  bool joined = round_bf16;  // the first chain waits for every product
  auto emit = [&](const sim::VectorChain& chain) {
    const sim::InstrRef ref = t.e_builder().vector(chain.instruction());
    t.chain(joined ? ref : t.join(ref));
    joined = true;
  };
  if (!c.narrow) {
    const size_t product_slot = c.ops.slot.at(c.product);
    const GroupBlocks blocks{
        [&](size_t slot) { return slot == product_slot ? product : t.in(c.loaded_at.at(slot)); },
        [&](size_t j) { return w.scratch_block(t, c.first_scratch + 1 + j); },
        [&] { return t.out(); },
        {}};  // no rng_uniform member (the fusion plan takes in none)
    sim::VectorChain chain;
    compute_group(l, c.members, c.ops, c.scratch, blocks, t.out(), chain);
    emit(chain);
    return;
  }
  // Entries per row of a row-periodic value (its period is whole entries: fusion_plan.h).
  const uint64_t run = c.ops.row_period / g.m;
  for (uint64_t first = 0; first < t.rows();) {
    const uint64_t left = t.rows() - first;
    const uint64_t n = run > 0 ? std::min(left, run - (t.first_row() + first) % run) : left;
    emit(consume_entries(l, t, g, w, c, product, first, n));
    first += n;
  }
}

// Entry `e` of a batched tile: its operands' slices of `values` (each operand's [rows, cols]
// block in the tile), each one stored transposed transposed into its scratch block first, then
// its product by an MXU, written into the tile's output.
void multiply_entry(Lowering& l, Tile& t, const BatchedGeometry& g,
                    const std::array<BatchedOperand, 2>& operands,
                    const std::array<isa::Block, 2>& values, const BatchedWidths& w,
                    const isa::Block& products, uint64_t e, std::vector<uint32_t>& next_slot) {
  // Operand i's slice of entry e as the MXU reads it: [m, k] for the lhs, [k, cols] for the rhs.
  const std::array<std::pair<uint32_t, uint32_t>, 2> dims{{{g.m, g.k}, {g.k, g.cols}}};
  std::array<isa::Block, 2> slices;
  bool chained = false;
  for (size_t i = 0; i < 2; ++i) {
    const BatchedOperand& o = operands[i];
    const auto [rows, cols] = dims[i];
    const uint64_t at = values[i].address() + e * o.cols * 4;
    chained = chained || o.made();
    if (!o.transposed) {
      slices[i] = block(at, rows, cols, isa::F32);
      continue;
    }
    // Entry e's row of its block for the transposed slices (operand_scratch).
    const size_t j = o.first_scratch + (o.made() ? 1 : 0);
    const isa::Block entries = w.scratch_block(t, j);
    const isa::Block into = block(entries.address() + e * entries.cols() * 4, rows, cols, isa::F32);
    t.chain(t.e_builder().transpose(into, block(at, cols, rows, isa::F32)));
    slices[i] = into;
    chained = true;
  }
  // With nothing made or transposed the MXU work waits for the tile's loads alone (each MXU runs
  // in order, so its load_weights waiting is enough); otherwise for the chain.
  const uint64_t after = chained ? t.chain_count() : 0;
  emit_mxu_product(
      l.emit.core(), t.e_builder(), slices[0], slices[1],
      block(products.address() + e * g.c_cols * 4, g.m, g.cols, isa::F32), false, l.precision,
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

// A batch of GEMMs with no operand shared ([batches, m, k] x [batches, k, cols], attention's
// scores and their gradients) as one fragment over tiles of whole batch entries: per entry, an
// MXU loads its weights and streams its rows, the entries going round the MXUs. An operand its
// group makes is computed for the tile's entries first; one stored transposed (`transposes`) is
// loaded as it lies and each entry transposed into a scratch block by the vector unit, whose
// chain the entry's MXU work waits for. False (nothing emitted) when one entry's operands,
// product and scratch do not fit a tile.
bool batched_matmul_in_vmem(Lowering& l, const BatchedGeometry& g,
                            std::array<BatchedOperand, 2> operands, BatchedConsumer consumer,
                            const TileOperand& out, bool round_bf16) {
  const BatchedWidths widths =
      batched_widths(g, {operands[0].making(), operands[1].making()}, consumer.making());
  if (!fits_tile(widths, l.emit.tile_budget_bytes())) return false;
  std::vector<TileOperand> loads;
  for (BatchedOperand& o : operands) {
    o.first_input = loads.size();
    o.first_scratch = widths.first[static_cast<size_t>(&o - operands.data())];
    if (o.made()) {
      loads.insert(loads.end(), o.ops.tiles.begin(), o.ops.tiles.end());
    } else {
      loads.push_back(o.loaded);
    }
  }
  consumer.first_scratch = widths.first[2];
  if (consumer.present()) add_consumer_loads(consumer, loads);
  const auto total = static_cast<uint32_t>(widths.scratch_total());
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  l.emit.rowwise(
      out, static_cast<uint64_t>(g.batches), loads, total > 0 ? 1 : 0, total, [&](Tile& t) {
        sim::VectorChain chain;
        const isa::Block a = operand_in_tile(l, t, widths, operands[0], chain);
        const isa::Block w = operand_in_tile(l, t, widths, operands[1], chain);
        if (!chain.empty()) t.chain(t.e_builder().vector(chain.instruction()));
        const isa::Block products =
            consumer.present() ? widths.scratch_block(t, consumer.first_scratch) : t.out();
        for (uint64_t e = 0; e < t.rows(); ++e)
          multiply_entry(l, t, g, operands, {a, w}, widths, products, e, next_slot);
        if (consumer.present()) {
          consume_in_tile(l, t, g, widths, consumer, products, round_bf16);
        } else if (round_bf16) {  // after every product: the store waits for the chain
          round_bf16_in_tile(t, t.out(), true);
        }
      });
  return true;
}

// Where a matmul's fragment stores its entries: its own buffer (or its consumer group's root's),
// each entry's m rows of cols after the last; or a merge of its heads' buffer, entry o x H + h's
// rows from element (o x m x H + h) x cols, H x cols apart (lower_matmul_into_merge).
struct ProductStore {
  uint64_t address = 0;
  uint64_t heads = 0;  // H; 0: entries dense
  // Where entry e starts, in bytes from `address`.
  uint64_t entry_at(const BatchedGeometry& g, uint64_t e) const {
    return heads == 0 ? e * g.c_cols * 4 : TileOperand::Entries::of_heads(heads, g.m, g.cols).at(e);
  }
  TileOperand tile(const BatchedGeometry& g) const {
    TileOperand out{TileOperand::Kind::kFull, address, isa::F32, static_cast<uint32_t>(g.c_cols)};
    if (heads > 0) out.entries = TileOperand::Entries::of_heads(heads, g.m, g.cols);
    return out;
  }
};

// Matmul `id` with its entries transposed: (a b)^T = b^T a^T, the operands swapped, each read
// transposed.
BatchedGeometry entries_transposed(BatchedGeometry g) {
  std::swap(g.m, g.cols);
  std::swap(g.views[0], g.views[1]);
  std::swap(g.operand_cols[0], g.operand_cols[1]);
  for (MatmulOperandView& v : g.views) v.transposed = !v.transposed;
  g.transposes = {g.views[0].transposed, g.views[1].transposed};
  return g;
}

absl::Status lower_product(Lowering& l, int id, const std::vector<int>& consumer,
                           const ProductStore& store, bool transposed = false) {
  const Node& n = l.node(id);
  // A bf16 product is rounded in VMEM before it leaves, on every path below.
  const bool round_bf16 = n.dtype == DType::kBF16;
  const BatchedGeometry g = transposed ? entries_transposed(batched_geometry(l.graph, id))
                                       : batched_geometry(l.graph, id);
  if (!g.shared && g.batches > 1) {
    std::array<BatchedOperand, 2> operands{batched_operand(l, g, 0), batched_operand(l, g, 1)};
    const bool made = operands[0].made() || operands[1].made() || !consumer.empty();
    if (batched_matmul_in_vmem(l, g, std::move(operands), batched_consumer(l, id, consumer, g),
                               store.tile(g), round_bf16))
      return absl::OkStatus();
    // The fusion plan recomputes an operand's group, or takes in a consumer, only where the
    // tile fits.
    if (made)
      return absl::InternalError(str_cat(
          "matmul ", n.label, ": an operand made or a consumer taken in does not fit its tile"));
  }
  if (!consumer.empty())
    return absl::InternalError(
        str_cat("matmul ", n.label, ": a consumer taken in by a product that is not batched"));
  const uint64_t a_at = l.address(g.views[0].source), w_at = l.address(g.views[1].source);
  const int64_t gemms = g.shared ? 1 : g.batches;
  const uint32_t rows = g.shared ? static_cast<uint32_t>(g.batches * g.m) : g.m;
  for (int64_t bi = 0; bi < gemms; ++bi) {
    const auto at = static_cast<uint64_t>(bi);
    if (absl::Status s =
            emit_hbm_gemm(l, a_at + g.entry_at(0, at), w_at + g.entry_at(1, at),
                          store.address + store.entry_at(g, at), rows, g.k, g.cols, g.transposes,
                          {g.row_elements(0), g.row_elements(1), store.heads * g.cols}, round_bf16);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool batched_matmul_fits(const Graph& graph, int id, const config::CoreSpec& core,
                         const std::array<MatmulOperandMaking, 2>& making,
                         std::optional<MatmulOperandMaking> consumer) {
  const BatchedGeometry g = batched_geometry(graph, id);
  return !g.shared && g.batches > 1 &&
         fits_tile(batched_widths(g, making, consumer), tile_slot_bytes(core));
}

absl::Status lower_matmul(Lowering& l, int id) { return lower_matmul_into_consumer(l, id, {}); }

absl::Status lower_matmul_into_consumer(Lowering& l, int id, const std::vector<int>& consumer) {
  return lower_product(l, id, consumer, {l.address(consumer.empty() ? id : consumer.back()), 0});
}

absl::Status lower_matmul_into_merge(Lowering& l, int id, int merge) {
  const Node& t = l.node(merge);
  // A merge of heads ([..., H, S, D] -> [..., S, H, D]), or the last two swapped.
  const bool heads = merged_product(l.graph, merge) >= 0;
  return lower_product(
      l, id, {},
      {l.address(merge), heads ? static_cast<uint64_t>(t.shape.dim(t.shape.rank() - 2)) : 0},
      !heads || t.inputs[0] != id);
}

}  // namespace tpusim::runtime::tpusim_backend
