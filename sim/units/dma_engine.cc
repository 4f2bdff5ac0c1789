#include "sim/units/dma_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim/isa/ops.h"
#include "sim/memory/block.h"

namespace tpusim::sim {

namespace {

// The block `src` of the memory at `from` into the block `dst` (same shape) of the memory at
// `to`, byte for byte.
void copy_block(const uint8_t* from, const isa::Block& src, uint8_t* to, const isa::Block& dst) {
  if (is_dense(src) && is_dense(dst)) {
    std::memcpy(to + dst.address(), from + src.address(), payload_bytes(src));
    return;
  }
  const uint64_t row_bytes = static_cast<uint64_t>(src.cols()) * dtype_bytes(src.dtype());
  for (uint32_t r = 0; r < src.rows(); ++r) {
    std::memcpy(to + dst.address() + r * row_stride(dst),
                from + src.address() + r * row_stride(src), row_bytes);
  }
}

}  // namespace

DmaEngine::DmaEngine(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
                     DmaWiring wiring)
    : Unit(name, ctx, stats, "DMA engine: HBM <-> VMEM block copies", /*core_work=*/true),
      vmem_(wiring.vmem),
      hbm_(wiring.hbm),
      numerics_(wiring.numerics) {
  stats_.add("bytes", "bytes", "bytes copied", [this] { return static_cast<double>(bytes_); });
  stats_.on_reset([this] { bytes_ = 0; });
}

void DmaEngine::execute(const IssuedInstruction& item) {
  const isa::Dma& dma = item.instr->dma();
  const bool to_vmem = dma.direction() == isa::Dma::HBM_TO_VMEM;
  const isa::Block& hbm_block = to_vmem ? dma.src() : dma.dst();
  const isa::Block& vmem_block = to_vmem ? dma.dst() : dma.src();
  // Packed bf16 values are charged at 2 bytes an element (a TPU's bf16 buffer); their f32
  // words still move whole below.
  const uint64_t bytes = payload_bytes(hbm_block) / (dma.packed_bf16() ? 2 : 1);
  vmem_.touch(end_address(vmem_block));
  const uint64_t start = ctx_.now_cycle();

  const double hbm_end = hbm_.transfer(static_cast<double>(start), hbm_block.address(), bytes);
  const double vmem_end = vmem_.ports().reserve(static_cast<double>(start), bytes).end;
  const auto done = ceil_cycle(std::max(hbm_end, vmem_end));

  if (!ctx_.timing_only()) {
    const isa::Block& src = dma.src();
    const isa::Block& dst = dma.dst();
    Memory& src_mem = to_vmem ? hbm_.memory() : vmem_.memory();
    Memory& dst_mem = to_vmem ? vmem_.memory() : hbm_.memory();
    const uint8_t* from = src_mem.base_covering(end_address(src));
    uint8_t* to = dst_mem.base_covering(end_address(dst));
    if (to_vmem) vmem_.note_write(dst.address(), end_address(dst));
    numerics_.post(true, host_range(from, src), host_range(to, dst),
                   [from, to, &src, &dst] { copy_block(from, src, to, dst); });
  }
  bytes_ += bytes;
  hbm_.bandwidth().add_bytes(ctx_.clock().time_of(Cycles(start)),
                             ctx_.clock().time_of(Cycles(done)), static_cast<double>(bytes));
  busy_cycles_ += done - start;
  trace(op_name(*item.instr), start, done);
  profile(start, done, {0, static_cast<double>(bytes)});
  ctx_.sync().complete_at(done, item.instr->signal());
  wait_until(done);
}

}  // namespace tpusim::sim
