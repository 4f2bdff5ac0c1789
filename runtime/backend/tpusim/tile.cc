// A row tile's own operations (emitter.h, Tile): its blocks, its vector chain and the work it
// fans out to other units.
#include "runtime/backend/tpusim/emitter.h"
#include "sim/memory/block.h"

namespace tpusim::runtime::tpusim_backend {

using sim::block;
using sim::InstrRef;

isa::Block Tile::in(size_t i) const { return inputs_[i]; }
isa::Block Tile::out() const { return out_; }

isa::Block Tile::scratch(size_t j, uint32_t width) const {
  const uint32_t w = width > 0 ? width : (scratch_cols_ > 0 ? scratch_cols_ : cols_);
  return block(scratch_base_ + j * scratch_stride_, rows_, w, isa::F32);
}

sim::CoreBuilder& Tile::e_builder() { return e_->b_; }

InstrRef Tile::chain(InstrRef ref) {
  FlagPool& pool = e_->flags_;
  ref.wait(e_->chain_, pool.count(e_->chain_));
  e_->ordered(ref);
  pool.signal(ref, e_->chain_);
  return ref;
}

uint64_t Tile::chain_count() const { return e_->flags_.count(e_->chain_); }

InstrRef Tile::fan_out(InstrRef ref, uint64_t after) {
  FlagPool& pool = e_->flags_;
  if (after > 0) ref.wait(e_->chain_, after);
  e_->ordered(ref);
  pool.signal(ref, fanned_flag_);
  return ref;
}

InstrRef Tile::join(InstrRef ref) {
  auto wait_for = [&](uint32_t flag) {
    const uint64_t fanned = e_->flags_.count(flag);
    if (fanned > 0) ref.wait(flag, fanned);
  };
  wait_for(fanned_flag_);
  if (epilogue_) {
    for (uint32_t flag : e_->fanned_in_slot_) wait_for(flag);
  }
  return ref;
}

void Tile::after_loads(InstrRef& ref) const {
  for (const auto& [flag, count] : first_waits_) ref.wait(flag, count);
}

InstrRef Tile::store(const isa::Block& vmem, const isa::Block& hbm, uint64_t after) {
  InstrRef ref = fan_out(e_->b_.dma_to_hbm(vmem, hbm, e_->next_engine()), after);
  e_->wrote_hbm(ref);
  return ref;
}

}  // namespace tpusim::runtime::tpusim_backend
