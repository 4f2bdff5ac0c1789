#pragma once
// Emits the instructions of the tpusim compiler's fragments (one per graph op) into one core's
// program. Ordering between fragments goes through HBM: every instruction of a fragment waits
// until all HBM writes of earlier fragments have landed (the `written` flag reaches its count at
// the fragment's start), and every write to HBM signals `written`. Within a fragment the work
// is a double-buffered pipeline over row tiles of a 2D view of the tensors: DMA the tile's
// operands into one VMEM slot while the vector unit computes on the other, then DMA the result
// out; a slot's next operands load once its tile's work is done, while its result still goes
// out. Vector ops of a tile are chained through a flag, so each waits for its predecessor's
// result (the pipeline latency), as an in-order vector unit with interlocks would.
//
// Overlapped collectives (schedule.h) signal `collectives_done` instead of `written`; a node whose
// fragments touch one's buffers also waits for that flag (wait_for_collectives).

#include <cstdint>
#include <functional>
#include <vector>

#include <absl/status/status.h>

#include "configs/slice_spec.h"
#include "runtime/lowering/flag_pool.h"
#include "runtime/lowering/vmem_budget.h"
#include "sim/isa/builder.h"

namespace tpusim::runtime::tpusim_backend {

// An operand of a row-tiled fragment, relative to the output's [rows, cols] view.
struct TileOperand {
  enum class Kind {
    kFull,    // [rows, cols]
    kRow,     // [1, cols]: the same for every row, loaded once
    kColumn,  // [rows, 1]
    kScalar,  // [1, 1]: one value for every element, loaded once (a TPU vector op's scalar
              // operand, broadcast into the lanes)
  };
  Kind kind = Kind::kFull;
  // Loaded once into the region above the tile slots rather than with each tile.
  bool loaded_once() const { return kind == Kind::kRow || kind == Kind::kScalar; }
  // One value a row: no width of its own to take from the view it is read against.
  bool scalar_or_column() const { return kind == Kind::kColumn || kind == Kind::kScalar; }
  uint64_t hbm = 0;
  isa::DType dtype = isa::F32;
  uint32_t cols = 0;  // width of a kFull or kRow operand when it differs from the output's
  // kFull and kColumn: bytes from one row's start in HBM to the next's; 0: the rows are dense.
  // A stride wider than the row reads a band of each row (a band of rows of each image).
  uint64_t stride = 0;
  // A kFull operand whose rows are entries lying apart in HBM, each loaded by a DMA of its own:
  // row r of a tile is `rows` rows of `cols` elements from hbm + (r / per_group) * group_bytes +
  // (r % per_group) * offset_bytes, each `stride` bytes after the one before (a batched product's
  // operand read where a split of its heads would have written it: lower_matmul.cc). rows 0: the
  // tile's rows are dense as above.
  struct Entries {
    uint32_t rows = 0, cols = 0;
    uint64_t stride = 0, per_group = 1, group_bytes = 0, offset_bytes = 0;
    uint64_t at(uint64_t r) const {
      return (r / per_group) * group_bytes + (r % per_group) * offset_bytes;
    }
    // Entry o x heads + h of a [..., rows, heads, cols] f32 value: its rows of h's cols.
    static Entries of_heads(uint64_t heads, uint32_t rows, uint32_t cols) {
      const uint64_t row_bytes = uint64_t{cols} * 4;
      return {rows, cols, heads * row_bytes, heads, rows * heads * row_bytes, row_bytes};
    }
  };
  Entries entries{};
};

// One band of a fragment that works band by band (conv_bands.h): its output (kFull: its hbm,
// cols, dtype and stride; none for reduce_bands) and its operands, whose kRow operands are the
// first band's at the same positions, loaded once for all the bands; its scratch width.
struct TileBand {
  TileOperand out;
  std::vector<TileOperand> inputs;
  uint32_t scratch_width = 0;
};

class Emitter;

// One row tile of a fragment: where its operands, output and scratch sit in VMEM, and vector
// ops chained in order.
class Tile {
 public:
  uint32_t rows() const { return rows_; }
  uint32_t cols() const { return cols_; }
  uint64_t first_row() const { return first_row_; }
  isa::Block in(size_t i) const;
  isa::Block out() const;
  // reduce_rows's accumulator: the same block in every tile of the fragment.
  isa::Block accumulator() const { return accumulator_; }
  // Scratch j: [rows, cols] f32 (or [rows, `width`] when width > 0).
  isa::Block scratch(size_t j, uint32_t width = 0) const;
  // Appends a vector instruction to the tile's chain.
  sim::InstrRef chain(sim::InstrRef ref);
  // The chain's count now: an instruction waiting for it waits for the tile's work so far.
  uint64_t chain_count() const;
  // Appends an instruction off the chain, as work for another unit (the MXUs): it waits for the
  // chain to reach `after` (a chain_count() taken earlier; 0: not at all) and counts as fanned
  // out. The tile's store, and the next use of its slot, wait for every fanned-out instruction;
  // chained instructions do not, unless join()ed: the vector unit goes on with the next tile
  // while the MXUs work on this one.
  sim::InstrRef fan_out(sim::InstrRef ref, uint64_t after);
  // Makes `ref` wait for every instruction the tile's slot fanned out so far (a pipelined loop
  // counts each slot's apart; the epilogue waits for both slots' and the rest), before chaining
  // it, when it reads what they wrote.
  sim::InstrRef join(sim::InstrRef ref);
  // Adds the waits the tile's first instruction gets (its loads landed, the operands loaded
  // once, its slot free) to an instruction that may run before that one, as on another unit.
  void after_loads(sim::InstrRef& ref) const;
  // Writes a block of the tile's VMEM to HBM once the chain reaches `after`, fanned out beside
  // the tile's own store (the slot is not reused before it is done).
  sim::InstrRef store(const isa::Block& vmem, const isa::Block& hbm, uint64_t after);
  // The builder, to make the instructions chain() takes.
  sim::CoreBuilder& e_builder();

 private:
  friend class Emitter;
  Emitter* e_ = nullptr;
  uint32_t rows_ = 0, cols_ = 0, scratch_cols_ = 0;
  uint64_t first_row_ = 0;
  std::vector<isa::Block> inputs_;
  uint32_t fanned_flag_ = 0;  // the flag its fan_out signals and join waits for
  bool epilogue_ = false;     // join also waits for the pipelined slots' flags
  isa::Block out_;
  isa::Block accumulator_;
  uint64_t scratch_base_ = 0;
  uint64_t scratch_stride_ = 0;
  std::vector<std::pair<uint32_t, uint64_t>> first_waits_;  // flag, count (after_loads)
};

class Emitter {
 public:
  Emitter(const config::ChipSpec& chip, sim::CoreBuilder& builder, FlagPool& flags);

  sim::CoreBuilder& builder() { return b_; }
  FlagPool& flags() { return flags_; }
  const config::ChipSpec& chip() const { return chip_; }
  const config::CoreSpec& core() const { return core_; }
  uint64_t tile_budget_bytes() const { return slot_bytes_; }
  // The bytes a tile of `rows` rows takes in its slot: each block (of the given widths in f32
  // elements: operands, output, scratch) aligned on its own.
  static uint64_t tile_bytes(const std::vector<uint64_t>& widths, uint64_t rows);

  // Starts a fragment: its instructions wait for every HBM write emitted so far.
  void begin_fragment();
  // Applies the fragment's ordering wait (for instructions the helpers below do not make).
  void ordered(sim::InstrRef& ref);
  // Marks `ref` as writing HBM: later fragments wait for it.
  void wrote_hbm(sim::InstrRef& ref);
  uint32_t written_flag() const { return written_; }

  // Marks `ref` as an overlapped collective: later fragments do not wait for it unless told to.
  void overlapped_collective(sim::InstrRef& ref);
  // From now on ordered() also waits for the collectives-done flag to reach `count` (0: not).
  void wait_for_collectives(uint64_t count);
  // Whether ordered() has applied that wait to an instruction since.
  bool collectives_waited() const { return collectives_waited_; }
  uint32_t collectives_done_flag() const { return collectives_done_; }

  // out[rows, cols] (dtype out_dtype, in HBM) = body(tile) over row tiles. `scratch` f32
  // [rows, cols] buffers (or [rows, scratch_width]) are available per tile.
  void rowwise(uint64_t out_hbm, uint64_t rows, uint32_t cols, isa::DType out_dtype,
               const std::vector<TileOperand>& inputs, uint32_t scratch, uint32_t scratch_width,
               const std::function<void(Tile&)>& body);
  // The same with the output described as an operand (kFull: its hbm, cols, dtype and stride),
  // to write a band of each of its rows, or its rows as entries lying apart (its `entries`).
  void rowwise(const TileOperand& out, uint64_t rows, const std::vector<TileOperand>& inputs,
               uint32_t scratch, uint32_t scratch_width, const std::function<void(Tile&)>& body);

  // rowwise over each band in turn as one fragment, `body` told the band's index: the bands
  // write distinct parts of the output rows, so the slots keep turning from one band to the next
  // (a band's first tiles load while the band before computes its last) and the row operands
  // are loaded once. With `accumulator_elements` > 0 the tiles also reduce into an accumulator
  // as reduce_rows's (returned, and Tile::accumulator; finish with epilogue()).
  isa::Block rowwise_bands(uint64_t rows, const std::vector<TileBand>& bands, uint32_t scratch,
                           uint32_t accumulator_elements,
                           const std::function<void(Tile&, size_t band)>& body);

  // rowwise_bands with each tile's work in two parts, software-pipelined as XLA's TPU emitters
  // schedule a fusion's loop: `feed` (the operands the MXUs need made, the products issued) and
  // `finish` (what reads the products: rounding, sums). The next tile's feed is emitted before
  // this tile's finish, so the vector unit makes tile t+1's operands while the MXUs multiply
  // tile t, instead of waiting for them to finish first. Each slot's tiles count their fanned-out
  // work on a flag of their own, so that a tile's finish and store wait for its own products only.
  isa::Block pipelined_bands(uint64_t rows, const std::vector<TileBand>& bands, uint32_t scratch,
                             uint32_t accumulator_elements,
                             const std::function<void(Tile&, size_t band)>& feed,
                             const std::function<void(Tile&, size_t band)>& finish);

  // A fragment that reduces row tiles into an accumulator of its own instead of storing an
  // output per tile: like rowwise, with `scratch` scratch blocks of `scratch_width` per row and no
  // output,
  // and `accumulator_elements` f32 in the once-loaded region that stay the fragment's through all
  // its tiles (returned, and Tile::accumulator). A tile's slot is free again once its chain is
  // done. Finish with epilogue(): its chain follows every tile's work.
  isa::Block reduce_rows(uint64_t rows, const std::vector<TileOperand>& inputs, uint32_t scratch,
                         uint32_t scratch_width, uint32_t accumulator_elements,
                         const std::function<void(Tile&)>& body);
  // reduce_rows over each band in turn into one accumulator, as rowwise_bands.
  isa::Block reduce_bands(uint64_t rows, const std::vector<TileBand>& bands, uint32_t scratch,
                          uint32_t accumulator_elements,
                          const std::function<void(Tile&, size_t band)>& body);
  // A tile of no rows to chain a fragment's last instructions after its tiles' work (join()
  // them to wait for what the tiles fanned out too).
  Tile epilogue();
  // Where an epilogue's own blocks may go once joined to the tiles' work: the two tile slots,
  // whose tiles are done with them (the next fragment's loads wait for this one's writes).
  uint64_t epilogue_vmem() const { return 0; }
  uint64_t epilogue_vmem_bytes() const { return tiled_bytes(core_); }
  // A fragment whose tiles store no output: like reduce_rows without an accumulator, for bodies
  // that write HBM themselves (scatter_add's rows, by index). A tile's slot is free again once
  // its chain and what it fanned out are done.
  void each_tile(uint64_t rows, const std::vector<TileOperand>& inputs, uint32_t scratch,
                 uint32_t scratch_width, const std::function<void(Tile&)>& body);

  // Copies `rows` rows of `cols` elements between HBM locations (through VMEM), each side with
  // its own row stride in bytes (0: dense). Rows wider than a tile slot go in column chunks.
  void copy(uint64_t src, uint64_t src_stride, uint64_t dst, uint64_t dst_stride, uint64_t rows,
            uint32_t cols, isa::DType dtype);

  // OK unless a fragment could not be emitted (a row wider than a VMEM tile).
  const absl::Status& status() const { return status_; }

  // A VMEM region of `bytes` for fragments that manage VMEM themselves (from offset 0).
  uint64_t vmem_capacity() const { return core_.vmem_bytes; }
  // The DMA engine for the next transfer (spreads transfers over the engines).
  uint32_t next_engine() { return engine_++ % core_.dma_engines; }

 private:
  friend class Tile;
  const config::ChipSpec& chip_;
  const config::CoreSpec& core_;
  sim::CoreBuilder& b_;
  FlagPool& flags_;
  uint32_t written_;
  uint32_t loaded_[2];
  uint32_t slot_free_[2];
  uint32_t chain_;
  uint32_t once_;
  uint32_t collectives_done_;
  uint32_t fanned_;             // counts Tile::fan_out instructions
  uint32_t fanned_in_slot_[2];  // the same, per slot, for pipelined tiles
  uint64_t collectives_needed_ = 0;
  bool collectives_waited_ = false;
  uint64_t fragment_base_ = 0;  // `written` count every instruction of the fragment waits for
  uint64_t slot_bytes_ = 0;
  uint32_t engine_ = 0;
  absl::Status status_;
  bool row_fits(uint64_t row_bytes);
  struct TileLoop {
    uint64_t out_hbm;
    uint32_t cols;        // of the output; 0 without one
    uint64_t out_stride;  // bytes between the output's rows in HBM; 0: dense
    isa::DType out_dtype;
    uint64_t rows;
    uint32_t scratch, scratch_width;
    uint32_t accumulator_elements;  // > 0: the tiles reduce into this
    bool stores = true;             // each tile stores its output (false: no output)
    // Output rows that are entries lying apart, each stored by a DMA of its own (as
    // TileOperand::entries reads them); rows 0: the rows lie as out_stride says.
    TileOperand::Entries out_entries{};
  };
  isa::Block tile_loop(const TileLoop& loop, const std::vector<TileOperand>& inputs,
                       const std::function<void(Tile&)>& body);
  // The tile loops of a fragment's bands one after the other, the slots turning on: a tile
  // loop of each band's loop (all of one `rows`, `scratch`, accumulator and `stores`) and
  // inputs, the row operands and the accumulator the first band's.
  struct LoopBand {
    TileLoop loop;
    const std::vector<TileOperand>* inputs;
  };
  // With `finish` (pipelined_bands), each tile's finish after the next tile's body.
  isa::Block band_loops(const std::vector<LoopBand>& bands,
                        const std::function<void(Tile&, size_t band)>& body,
                        const std::function<void(Tile&, size_t band)>* finish = nullptr);
  std::vector<LoopBand> loop_bands(const std::vector<TileBand>& bands, uint64_t rows,
                                   uint32_t scratch, uint32_t accumulator_elements, bool stores);
  // The widths (elements) of the blocks a tile takes in its slot, each aligned: its full and
  // column inputs, its output, its scratch.
  static std::vector<uint64_t> slot_widths(const TileLoop& loop,
                                           const std::vector<TileOperand>& inputs);
  // Rows per tile: as many whole sublane groups as fit a slot; 0 (status_ set) when one row does
  // not.
  uint64_t rows_per_tile(const std::vector<uint64_t>& widths, uint64_t rows);
  // The row operands loaded once above the two slots, and the accumulator after them.
  struct OnceLoaded {
    std::vector<isa::Block> row_blocks;  // per input; set for row operands only
    isa::Block accumulator;
    uint64_t end = 0;    // the VMEM byte after the accumulator
    uint64_t count = 0;  // `once_`'s count after their loads
    bool any = false;    // some row operand was loaded
  };
  OnceLoaded load_row_operands(const TileLoop& loop, const std::vector<TileOperand>& inputs);
  // Which tile each slot last held: what the next tile in it waits for.
  class SlotTurns;
  struct WorkDone;
  struct TileTurns;
  struct StartedTile;
  // What the first instruction of a tile in slot `s` waits for: the slot's previous store (its
  // output block free), or, when the loop stores nothing, that tile's work.
  std::vector<std::pair<uint32_t, uint64_t>> slot_waits(const TileLoop& loop,
                                                        const TileTurns& turns, int s) const;
  // The work (chained and fanned out) of the slot's previous tile: what loads into it wait for.
  std::vector<std::pair<uint32_t, uint64_t>> work_waits(const TileTurns& turns, int s) const;
  // One tile of `n` rows from row `r0` in slot `s`: its loads and `body` (its fan-outs on the
  // slot's own flag when `own_fan_out`) ...
  StartedTile start_tile(const TileLoop& loop, const std::vector<TileOperand>& inputs,
                         const OnceLoaded& once, uint64_t r0, uint32_t n, int s, bool own_fan_out,
                         const TileTurns& turns, const std::function<void(Tile&)>& body);
  // ... then its `finish` and its store.
  void finish_tile(StartedTile& started, TileTurns& turns,
                   const std::function<void(Tile&)>& finish);
};

}  // namespace tpusim::runtime::tpusim_backend
