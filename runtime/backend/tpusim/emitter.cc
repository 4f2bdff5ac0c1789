#include "runtime/backend/tpusim/emitter.h"

#include <algorithm>
#include <array>
#include <limits>

#include "common/strings.h"
#include "sim/memory/block.h"

namespace tpusim::runtime::tpusim_backend {

using sim::block;
using sim::InstrRef;

namespace {

constexpr uint64_t kAlign = 512;
uint64_t align(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
}  // namespace

// The two VMEM slots that tiles take in turn. A tile reusing a slot waits until the slot's
// previous store has signalled `slot_free`: the flag's count when the fragment began plus the
// slot's uses since.
class Emitter::SlotTurns {
 public:
  SlotTurns(uint64_t free_count_0, uint64_t free_count_1)
      : free_start_{free_count_0, free_count_1} {}
  // The slot_free value a tile in slot `s` waits for; 0 when the fragment has not used it yet.
  uint64_t free_needed(int s) const {
    const auto i = static_cast<size_t>(s);
    return uses_[i] > 0 ? free_start_[i] + uses_[i] : 0;
  }
  // A tile in slot s stored its output in `stores` DMAs, each signalling slot_free.
  void used(int s, uint64_t stores = 1) { uses_[static_cast<size_t>(s)] += stores; }

 private:
  std::array<uint64_t, 2> free_start_;
  std::array<uint64_t, 2> uses_{};
};

// The chain count and fan-out flag and count a slot's last tile's work reached, and where its
// output block begins (its store reads it after the work; none when it stores nothing).
struct Emitter::WorkDone {
  uint64_t chain = 0;
  uint32_t fanned_flag = 0;
  uint64_t fanned = 0;
  uint64_t out_begin = std::numeric_limits<uint64_t>::max();
};

// The slots' turns over a tile loop, and per slot the work its last tile did.
struct Emitter::TileTurns {
  SlotTurns slots;
  std::array<WorkDone, 2> work_done{};
};

// A tile whose loads and body are emitted, its finish and store not yet.
struct Emitter::StartedTile {
  Tile tile;
  const TileLoop* loop = nullptr;
  int slot = 0;
  uint64_t chain_before = 0, fanned_before = 0, loaded = 0;
};

Emitter::Emitter(const config::ChipSpec& chip, sim::CoreBuilder& builder, FlagPool& flags)
    : chip_(chip), core_(chip.core), b_(builder), flags_(flags) {
  written_ = flags_.allocate();
  for (int i = 0; i < 2; ++i) {
    loaded_[i] = flags_.allocate();
    slot_free_[i] = flags_.allocate();
  }
  chain_ = flags_.allocate();
  once_ = flags_.allocate();
  collectives_done_ = flags_.allocate();
  fanned_ = flags_.allocate();
  for (uint32_t& flag : fanned_in_slot_) flag = flags_.allocate();
  // Two slots and the once-loaded region above them (vmem_budget.h).
  slot_bytes_ = tile_slot_bytes(core_);
}

void Emitter::begin_fragment() { fragment_base_ = flags_.count(written_); }

bool Emitter::row_fits(uint64_t row_bytes) {
  if (row_bytes > 0 && row_bytes <= slot_bytes_) return true;
  if (status_.ok()) {
    status_ = absl::UnimplementedError(str_cat("a row of ", row_bytes,
                                               " bytes does not fit the VMEM tile budget of ",
                                               slot_bytes_, " bytes"));
  }
  return false;
}

void Emitter::ordered(InstrRef& ref) {
  if (fragment_base_ > 0) ref.wait(written_, fragment_base_);
  if (collectives_needed_ > 0) {
    ref.wait(collectives_done_, collectives_needed_);
    collectives_waited_ = true;
  }
}

void Emitter::wrote_hbm(InstrRef& ref) { flags_.signal(ref, written_); }

void Emitter::overlapped_collective(InstrRef& ref) { flags_.signal(ref, collectives_done_); }

void Emitter::wait_for_collectives(uint64_t count) {
  collectives_needed_ = count;
  collectives_waited_ = false;
}

void Emitter::rowwise(uint64_t out_hbm, uint64_t rows, uint32_t cols, isa::DType out_dtype,
                      const std::vector<TileOperand>& inputs, uint32_t scratch,
                      uint32_t scratch_width, const std::function<void(Tile&)>& body) {
  rowwise(TileOperand{TileOperand::Kind::kFull, out_hbm, out_dtype, cols}, rows, inputs, scratch,
          scratch_width, body);
}

void Emitter::rowwise(const TileOperand& out, uint64_t rows, const std::vector<TileOperand>& inputs,
                      uint32_t scratch, uint32_t scratch_width,
                      const std::function<void(Tile&)>& body) {
  begin_fragment();
  if (!row_fits(uint64_t{out.cols} * 4)) return;
  tile_loop(TileLoop{out.hbm, out.cols, out.stride, out.dtype, rows, scratch, scratch_width, 0,
                     true, out.entries},
            inputs, body);
}

isa::Block Emitter::reduce_rows(uint64_t rows, const std::vector<TileOperand>& inputs,
                                uint32_t scratch, uint32_t scratch_width,
                                uint32_t accumulator_elements,
                                const std::function<void(Tile&)>& body) {
  begin_fragment();
  return tile_loop(
      TileLoop{0, 0, 0, isa::F32, rows, scratch, scratch_width, accumulator_elements, false},
      inputs, body);
}

isa::Block Emitter::rowwise_bands(uint64_t rows, const std::vector<TileBand>& bands,
                                  uint32_t scratch, uint32_t accumulator_elements,
                                  const std::function<void(Tile&, size_t band)>& body) {
  begin_fragment();
  for (const TileBand& band : bands)
    if (!row_fits(uint64_t{band.out.cols} * 4)) return {};
  return band_loops(loop_bands(bands, rows, scratch, accumulator_elements, true), body);
}
isa::Block Emitter::pipelined_bands(uint64_t rows, const std::vector<TileBand>& bands,
                                    uint32_t scratch, uint32_t accumulator_elements,
                                    const std::function<void(Tile&, size_t band)>& feed,
                                    const std::function<void(Tile&, size_t band)>& finish) {
  begin_fragment();
  for (const TileBand& band : bands)
    if (!row_fits(uint64_t{band.out.cols} * 4)) return {};
  return band_loops(loop_bands(bands, rows, scratch, accumulator_elements, true), feed, &finish);
}

isa::Block Emitter::reduce_bands(uint64_t rows, const std::vector<TileBand>& bands,
                                 uint32_t scratch, uint32_t accumulator_elements,
                                 const std::function<void(Tile&, size_t band)>& body) {
  begin_fragment();
  return band_loops(loop_bands(bands, rows, scratch, accumulator_elements, false), body);
}

std::vector<Emitter::LoopBand> Emitter::loop_bands(const std::vector<TileBand>& bands,
                                                   uint64_t rows, uint32_t scratch,
                                                   uint32_t accumulator_elements, bool stores) {
  std::vector<LoopBand> loops;
  for (const TileBand& band : bands) {
    const TileOperand& out = band.out;
    loops.push_back(LoopBand{TileLoop{stores ? out.hbm : 0, stores ? out.cols : 0,
                                      stores ? out.stride : 0, stores ? out.dtype : isa::F32, rows,
                                      scratch, band.scratch_width, accumulator_elements, stores},
                             &band.inputs});
  }
  return loops;
}

void Emitter::each_tile(uint64_t rows, const std::vector<TileOperand>& inputs, uint32_t scratch,
                        uint32_t scratch_width, const std::function<void(Tile&)>& body) {
  begin_fragment();
  tile_loop(TileLoop{0, 0, 0, isa::F32, rows, scratch, scratch_width, 0, false}, inputs, body);
}

uint64_t Emitter::tile_bytes(const std::vector<uint64_t>& widths, uint64_t rows) {
  uint64_t bytes = 0;
  for (uint64_t w : widths) bytes += align(rows * w * 4);
  return bytes;
}

Tile Emitter::epilogue() {
  Tile t;
  t.e_ = this;
  t.fanned_flag_ = fanned_;
  t.epilogue_ = true;
  return t;
}

std::vector<uint64_t> Emitter::slot_widths(const TileLoop& loop,
                                           const std::vector<TileOperand>& inputs) {
  std::vector<uint64_t> widths;
  for (const auto& in : inputs) {
    if (in.kind == TileOperand::Kind::kFull) widths.push_back(in.cols > 0 ? in.cols : loop.cols);
    if (in.kind == TileOperand::Kind::kColumn) widths.push_back(1);
  }
  widths.push_back(loop.cols);
  for (uint32_t j = 0; j < loop.scratch; ++j)
    widths.push_back(loop.scratch_width > 0 ? loop.scratch_width : loop.cols);
  return widths;
}

uint64_t Emitter::rows_per_tile(const std::vector<uint64_t>& widths, uint64_t rows) {
  uint64_t per_row = 0;
  for (uint64_t w : widths) per_row += w * 4;
  uint64_t tile_rows =
      std::max<uint64_t>(1, std::min<uint64_t>(rows, slot_bytes_ / (per_row + 64)));
  if (tile_rows > 8) tile_rows = tile_rows / 8 * 8;  // whole sublane groups
  // Alignment can take a few rows' worth more than per_row says when the tile is short.
  while (tile_rows > 1 && tile_bytes(widths, tile_rows) > slot_bytes_) --tile_rows;
  if (tile_bytes(widths, tile_rows) <= slot_bytes_) return tile_rows;
  if (status_.ok()) {
    status_ = absl::UnimplementedError(
        str_cat("a row of ", per_row, " bytes (operands, output and scratch: ", widths.size(),
                " blocks of ", kAlign, "-byte aligned VMEM, ", tile_bytes(widths, 1),
                " bytes) does not fit the VMEM tile budget of ", slot_bytes_, " bytes"));
  }
  return 0;
}

Emitter::OnceLoaded Emitter::load_row_operands(const TileLoop& loop,
                                               const std::vector<TileOperand>& inputs) {
  OnceLoaded once;
  uint64_t shared = 2 * slot_bytes_;
  once.row_blocks.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].loaded_once()) continue;
    const uint32_t width = inputs[i].kind == TileOperand::Kind::kScalar ? 1
                           : inputs[i].cols > 0                         ? inputs[i].cols
                                                                        : loop.cols;
    once.row_blocks[i] = block(shared, 1, width, inputs[i].dtype);
    shared = align(shared + uint64_t{width} * 4);
    auto dma = b_.dma_to_vmem(block(inputs[i].hbm, 1, width, inputs[i].dtype), once.row_blocks[i],
                              next_engine());
    ordered(dma);
    flags_.signal(dma, once_);
    once.any = true;
  }
  once.accumulator = block(shared, 1, loop.accumulator_elements, isa::F32);
  once.end = shared + uint64_t{loop.accumulator_elements} * 4;
  once.count = flags_.count(once_);
  return once;
}

isa::Block Emitter::tile_loop(const TileLoop& loop, const std::vector<TileOperand>& inputs,
                              const std::function<void(Tile&)>& body) {
  return band_loops({LoopBand{loop, &inputs}}, [&](Tile& tile, size_t) { body(tile); });
}

isa::Block Emitter::band_loops(const std::vector<LoopBand>& bands,
                               const std::function<void(Tile&, size_t band)>& body,
                               const std::function<void(Tile&, size_t band)>* finish) {
  std::vector<uint64_t> tile_rows;
  for (const LoopBand& band : bands) {
    tile_rows.push_back(rows_per_tile(slot_widths(band.loop, *band.inputs), band.loop.rows));
    if (tile_rows.back() == 0) return {};
  }
  // Row operands: loaded once into the shared region above the two slots; the accumulator after
  // them.
  const OnceLoaded once = load_row_operands(bands[0].loop, *bands[0].inputs);
  if (once.end > core_.vmem_bytes) {
    if (status_.ok()) {
      status_ = absl::UnimplementedError(
          str_cat("operands loaded once (and an accumulator) of ", once.end - 2 * slot_bytes_,
                  " bytes do not fit the ", core_.vmem_bytes - 2 * slot_bytes_,
                  " bytes of VMEM above the tile slots"));
    }
    return once.accumulator;
  }
  // A tile that stores its output frees its slot with that store; one that stores nothing, once
  // its chain is done.
  TileTurns turns{SlotTurns(flags_.count(slot_free_[0]), flags_.count(slot_free_[1])), {}};
  // Pipelined (`finish` given): a tile's finish is emitted after the next tile's body. The tile
  // waiting for its finish (at most one: a vector, where an optional trips GCC's
  // maybe-uninitialized check).
  std::vector<StartedTile> pending;
  size_t pending_band = 0;
  auto finish_pending = [&] {
    for (StartedTile& started : pending) {
      finish_tile(started, turns, [&](Tile& tile) {
        if (finish != nullptr) (*finish)(tile, pending_band);
      });
    }
    pending.clear();
  };
  uint64_t t = 0;
  for (size_t i = 0; i < bands.size(); ++i) {
    const TileLoop& loop = bands[i].loop;
    for (uint64_t r0 = 0; r0 < loop.rows; r0 += tile_rows[i], ++t) {
      const auto n = static_cast<uint32_t>(std::min(tile_rows[i], loop.rows - r0));
      StartedTile started =
          start_tile(loop, *bands[i].inputs, once, r0, n, static_cast<int>(t % 2),
                     finish != nullptr, turns, [&](Tile& tile) { body(tile, i); });
      if (finish == nullptr) {
        finish_tile(started, turns, [](Tile&) {});
        continue;
      }
      finish_pending();
      pending.push_back(std::move(started));
      pending_band = i;
    }
  }
  finish_pending();
  return once.accumulator;
}

std::vector<std::pair<uint32_t, uint64_t>> Emitter::slot_waits(const TileLoop& loop,
                                                               const TileTurns& turns,
                                                               int s) const {
  if (!loop.stores) return work_waits(turns, s);
  std::vector<std::pair<uint32_t, uint64_t>> waits;
  if (turns.slots.free_needed(s) > 0) waits.emplace_back(slot_free_[s], turns.slots.free_needed(s));
  return waits;
}

std::vector<std::pair<uint32_t, uint64_t>> Emitter::work_waits(const TileTurns& turns,
                                                               int s) const {
  std::vector<std::pair<uint32_t, uint64_t>> waits;
  const WorkDone& done = turns.work_done[static_cast<size_t>(s)];
  if (done.chain > 0) waits.emplace_back(chain_, done.chain);
  if (done.fanned > 0) waits.emplace_back(done.fanned_flag, done.fanned);
  return waits;
}

Emitter::StartedTile Emitter::start_tile(const TileLoop& loop,
                                         const std::vector<TileOperand>& inputs,
                                         const OnceLoaded& once, uint64_t r0, uint32_t n, int s,
                                         bool own_fan_out, const TileTurns& turns,
                                         const std::function<void(Tile&)>& body) {
  const uint32_t cols = loop.cols;
  const std::vector<std::pair<uint32_t, uint64_t>> free_waits = slot_waits(loop, turns, s);
  // The loads overwrite only the slot's operand blocks, which the slot's previous tile is done
  // with once its work is: they need not wait for that tile's store, which reads its output
  // block (input and output buffers turn over apart, as a TPU kernel's pipeline double-buffers
  // each operand and each output on its own).
  std::vector<std::pair<uint32_t, uint64_t>> load_waits = work_waits(turns, s);
  // The operands' blocks: the once-loaded rows, the rest laid out in slot s in order.
  std::vector<isa::Block> operands;
  uint64_t at = static_cast<uint64_t>(s) * slot_bytes_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TileOperand& in = inputs[i];
    if (in.loaded_once()) {
      operands.push_back(once.row_blocks[i]);
      continue;
    }
    const uint32_t width = in.kind == TileOperand::Kind::kFull ? (in.cols > 0 ? in.cols : cols) : 1;
    operands.push_back(block(at, n, width, in.dtype));
    at = align(at + uint64_t{n} * width * 4);
  }
  // A tile of another band lays its blocks out otherwise: where its operands reach into the
  // previous tile's output block, its loads wait for that block's store too.
  if (at > turns.work_done[static_cast<size_t>(s)].out_begin)
    load_waits.insert(load_waits.end(), free_waits.begin(), free_waits.end());
  StartedTile started;
  started.loop = &loop;
  started.slot = s;
  Tile& tile = started.tile;
  tile.e_ = this;
  tile.rows_ = n;
  tile.cols_ = cols;
  tile.first_row_ = r0;
  tile.accumulator_ = once.accumulator;
  tile.fanned_flag_ = own_fan_out ? fanned_in_slot_[s] : fanned_;
  tile.inputs_ = operands;
  // Loads of this tile's operands into slot s, once the slot's previous tile is done with it.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TileOperand& in = inputs[i];
    if (in.loaded_once()) continue;
    const isa::Block& vmem = operands[i];
    auto load = [&](const isa::Block& from, const isa::Block& into) {
      auto dma = b_.dma_to_vmem(from, into, next_engine());
      ordered(dma);
      for (const auto& [flag, count] : load_waits) dma.wait(flag, count);
      flags_.signal(dma, loaded_[s]);
    };
    if (const TileOperand::Entries& e = in.entries; e.rows > 0) {
      for (uint32_t r = 0; r < n; ++r)
        load(block(in.hbm + e.at(r0 + r), e.rows, e.cols, in.dtype, e.stride),
             block(vmem.address() + uint64_t{r} * vmem.cols() * 4, e.rows, e.cols, in.dtype));
      continue;
    }
    const uint64_t stride = in.stride > 0 ? in.stride : uint64_t{vmem.cols()} * 4;
    load(block(in.hbm + r0 * stride, n, vmem.cols(), in.dtype, in.stride), vmem);
  }
  tile.out_ = block(at, n, cols, loop.out_dtype);
  at = align(at + uint64_t{n} * cols * 4);
  tile.scratch_base_ = at;
  tile.scratch_stride_ =
      align(uint64_t{n} * (loop.scratch_width > 0 ? loop.scratch_width : cols) * 4);
  tile.scratch_cols_ = loop.scratch_width;
  // The first vector op of the tile waits for its loads (and the once-loaded rows); when the
  // tile loads nothing, for the slot to be free.
  started.chain_before = flags_.count(chain_);
  started.fanned_before = flags_.count(tile.fanned_flag_);
  started.loaded = flags_.count(loaded_[s]);
  if (started.loaded > 0) tile.first_waits_.emplace_back(loaded_[s], started.loaded);
  if (once.any) tile.first_waits_.emplace_back(once_, once.count);
  for (const auto& wait : free_waits) tile.first_waits_.push_back(wait);
  const int first_vpu = b_.size();
  body(tile);
  if (b_.size() > first_vpu) {
    isa::Instruction* first = b_.builder_instruction(first_vpu);
    for (const auto& [flag, count] : tile.first_waits_) {
      auto* w = first->add_wait();
      w->set_flag(flag);
      w->set_value(count);
    }
  }
  return started;
}

void Emitter::finish_tile(StartedTile& started, TileTurns& turns,
                          const std::function<void(Tile&)>& finish) {
  Tile& tile = started.tile;
  const TileLoop& loop = *started.loop;
  const int s = started.slot;
  finish(tile);
  turns.work_done[static_cast<size_t>(s)] = {
      flags_.count(chain_), tile.fanned_flag_, flags_.count(tile.fanned_flag_),
      loop.stores ? tile.out_.address() : std::numeric_limits<uint64_t>::max()};
  if (!loop.stores) return;  // nothing to store
  // Store the tile once its last vector op is done; that frees the slot.
  const uint32_t cols = loop.cols;
  const uint64_t chained = flags_.count(chain_), fanned = flags_.count(tile.fanned_flag_);
  auto store = [&](const isa::Block& from, const isa::Block& into) {
    auto dma = b_.dma_to_hbm(from, into, next_engine());
    ordered(dma);
    if (chained > started.chain_before) dma.wait(chain_, chained);
    if (fanned > started.fanned_before) dma.wait(tile.fanned_flag_, fanned);
    if (started.loaded > 0) dma.wait(loaded_[s], started.loaded);
    flags_.signal(dma, slot_free_[s]);
    wrote_hbm(dma);
  };
  if (const TileOperand::Entries& e = loop.out_entries; e.rows > 0) {
    for (uint32_t r = 0; r < tile.rows_; ++r)
      store(block(tile.out_.address() + uint64_t{r} * cols * 4, e.rows, e.cols, loop.out_dtype),
            block(loop.out_hbm + e.at(tile.first_row_ + r), e.rows, e.cols, loop.out_dtype,
                  e.stride));
    turns.slots.used(s, tile.rows_);
    return;
  }
  const uint64_t out_stride = loop.out_stride > 0 ? loop.out_stride : uint64_t{cols} * 4;
  store(tile.out_, block(loop.out_hbm + tile.first_row_ * out_stride, tile.rows_, cols,
                         loop.out_dtype, loop.out_stride));
  turns.slots.used(s);
}

void Emitter::copy(uint64_t src, uint64_t src_stride, uint64_t dst, uint64_t dst_stride,
                   uint64_t rows, uint32_t cols, isa::DType dtype) {
  begin_fragment();
  const uint64_t row_bytes = uint64_t{cols} * 4;
  const uint64_t src_step = src_stride > 0 ? src_stride : row_bytes,
                 dst_step = dst_stride > 0 ? dst_stride : row_bytes;
  // A row wider than a tile slot (a variable's whole update, one row of a flat copy) goes in
  // chunks of columns, each a strided block of every row, the widest whole vector rows that fit.
  uint32_t chunk = cols;
  if (row_bytes > slot_bytes_) {
    const uint64_t fit = slot_bytes_ / 4;
    chunk = static_cast<uint32_t>(std::max<uint64_t>(1, fit >= 128 ? fit / 128 * 128 : fit));
  }
  const uint64_t tile_rows =
      std::max<uint64_t>(1, std::min<uint64_t>(rows, slot_bytes_ / (uint64_t{chunk} * 4)));
  SlotTurns slots(flags_.count(slot_free_[0]), flags_.count(slot_free_[1]));
  uint64_t t = 0;
  for (uint32_t c0 = 0; c0 < cols; c0 += chunk) {
    const uint32_t width = std::min(chunk, cols - c0);
    // Whole rows keep the caller's strides (0: dense); a chunk steps over the rest of each row.
    const uint64_t src_block_stride = width < cols ? src_step : src_stride,
                   dst_block_stride = width < cols ? dst_step : dst_stride;
    for (uint64_t r0 = 0; r0 < rows; r0 += tile_rows, ++t) {
      const auto n = static_cast<uint32_t>(std::min(tile_rows, rows - r0));
      const int s = static_cast<int>(t % 2);
      const isa::Block vmem = block(static_cast<uint64_t>(s) * slot_bytes_, n, width, dtype);
      auto load = b_.dma_to_vmem(
          block(src + r0 * src_step + uint64_t{c0} * 4, n, width, dtype, src_block_stride), vmem,
          next_engine());
      ordered(load);
      if (slots.free_needed(s) > 0) load.wait(slot_free_[s], slots.free_needed(s));
      flags_.signal(load, loaded_[s]);
      auto store = b_.dma_to_hbm(
          vmem, block(dst + r0 * dst_step + uint64_t{c0} * 4, n, width, dtype, dst_block_stride),
          next_engine());
      ordered(store);
      store.wait(loaded_[s], flags_.count(loaded_[s]));
      flags_.signal(store, slot_free_[s]);
      wrote_hbm(store);
      slots.used(s);
    }
  }
}

}  // namespace tpusim::runtime::tpusim_backend
