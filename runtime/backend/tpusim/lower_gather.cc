// Lowering of the row lookups, gather and scatter_add (graph.h), to indexed DMAs (isa.proto,
// Dma.index): the simulator's stand-in for a TPU's scalar unit reading indices and issuing one
// row DMA per index.
//
// Why DMAs, not the MXU. XLA on TPU gathers rows of an operand in HBM with dynamic-slice DMAs,
// one per index, their offsets computed from the indices; the alternative, a one-hot matmul
// (BERT's use_one_hot_embeddings), spends vocab x width MACs per index and pays off only for
// small vocabularies (BERT's 2 token types). For BERT's 30,522 x 1,024 word table and 2,048
// indices it would be 128 GFLOP on the MXUs (about 1 ms of a v3 core at peak) to move 8 MiB of
// rows (about 10 us of HBM bandwidth), and it would round the f32 table to bf16 where a gather
// copies it. So the time here is the DMA engines' and the HBM channels': one request per row.
//
// gather: a row-tiled fragment over the output's [indices, width] view. A tile loads its indices
// (one DMA), gathers the rows they name from the table in HBM into its output block (one indexed
// DMA of a request per row) and stores the block (one DMA): the table never enters VMEM whole,
// and the instructions are three per tile, not per row or element.
//
// scatter_add: XLA's scatter on TPU, without sorted or unique indices, is a loop over the updates:
// a dynamic-slice of the row an index names, the add, a dynamic-update-slice back (openxla/xla
// #12982 shows the loop). Here: the output zeroed (a fill fragment), then, update by update in
// index order, an indexed DMA of its row into VMEM, a vector ADD of the update, and an indexed DMA
// back. Each waits for the one before, since two updates may name one row, so the sums are in
// index order in f32: the cpu kernel's, bit for bit. Three instructions and an HBM round trip per
// update.
#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"
#include "sim/memory/block.h"

namespace tpusim::runtime::tpusim_backend {

using sim::block;

namespace {

// Row r of a VMEM block, as a block of its own.
isa::Block row_of(const isa::Block& b, uint32_t r) {
  return block(b.address() + r * sim::row_stride(b), 1, b.cols(), b.dtype());
}

// The [rows, cols] table at `address` (f32 words: bf16 tables too), or an error naming the node
// when it does not fit a block's 32-bit extents.
absl::Status table_block(const Lowering& l, int id, uint64_t address, const Shape& table,
                         isa::Block* out) {
  if (table.dim(0) > UINT32_MAX || table.dim(1) > UINT32_MAX) {
    return absl::UnimplementedError(str_cat("tpusim backend: node %", id, " (",
                                            op_name(l.node(id).op), "): a table of ", table.str(),
                                            " exceeds a DMA block's 32-bit rows and columns"));
  }
  *out = block(address, static_cast<uint32_t>(table.dim(0)), static_cast<uint32_t>(table.dim(1)),
               isa::F32);
  return absl::OkStatus();
}

}  // namespace

absl::Status lower_gather(Lowering& l, int id) {
  const Node& n = l.node(id);
  isa::Block table;
  if (absl::Status s =
          table_block(l, id, l.address(n.inputs[0]), l.node(n.inputs[0]).shape, &table);
      !s.ok())
    return s;
  const auto rows = static_cast<uint64_t>(l.node(n.inputs[1]).shape.elements());
  if (rows == 0) return absl::OkStatus();
  l.emit.rowwise(l.address(id), rows, table.cols(), isa::F32,
                 {TileOperand{TileOperand::Kind::kColumn, l.address(n.inputs[1]), isa::S32}}, 0, 0,
                 [&](Tile& t) {
                   // The tile's first instruction: it waits for the indices (emit_tile adds it).
                   t.fan_out(
                       t.e_builder().dma_gather(table, t.out(), t.in(0), l.emit.next_engine()), 0);
                 });
  return absl::OkStatus();
}

absl::Status lower_scatter_add(Lowering& l, int id) {
  const Node& n = l.node(id);
  isa::Block out;
  if (absl::Status s = table_block(l, id, l.address(id), n.shape, &out); !s.ok()) return s;
  l.emit.rowwise(l.address(id), out.rows(), out.cols(), isa::F32, {}, 0, 0,
                 [](Tile& t) { t.chain(t.e_builder().fill(t.out(), 0.0f)); });
  const auto updates = static_cast<uint64_t>(l.node(n.inputs[1]).shape.elements());
  if (updates == 0) return absl::OkStatus();
  const std::vector<TileOperand> inputs = {
      TileOperand{TileOperand::Kind::kFull, l.address(n.inputs[0]), isa::F32, out.cols()},
      TileOperand{TileOperand::Kind::kColumn, l.address(n.inputs[1]), isa::S32}};
  l.emit.each_tile(updates, inputs, 1, out.cols(), [&](Tile& t) {
    sim::CoreBuilder& b = t.e_builder();
    for (uint32_t r = 0; r < t.rows(); ++r) {
      const isa::Block index = row_of(t.in(1), r), row = row_of(t.scratch(0), r);
      const uint32_t engine = l.emit.next_engine();
      t.chain(b.dma_gather(out, row, index, engine));
      t.chain(b.binary(isa::Vector::ADD, row, row, row_of(t.in(0), r)));
      sim::InstrRef back = t.chain(b.dma_scatter(row, out, index, engine));
      l.emit.wrote_hbm(back);
    }
  });
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
