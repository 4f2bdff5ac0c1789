#include "sim/units/dma_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

// The table rows an indexed DMA's indices name (element r of the s32 `index` block, row-major,
// clamped into [0, table_rows)), read from the VMEM at `vmem`.
std::vector<uint64_t> table_rows_of(const uint8_t* vmem, const isa::Block& index,
                                    uint64_t table_rows) {
  std::vector<uint64_t> rows;
  rows.reserve(static_cast<size_t>(index.rows()) * index.cols());
  for (uint32_t r = 0; r < index.rows(); ++r) {
    for (uint32_t c = 0; c < index.cols(); ++c) {
      int32_t i = 0;
      std::memcpy(&i, vmem + index.address() + r * row_stride(index) + uint64_t{c} * 4, 4);
      rows.push_back(i < 0 ? 0 : std::min<uint64_t>(static_cast<uint64_t>(i), table_rows - 1));
    }
  }
  return rows;
}

// Row r of the VMEM block to or from table row `rows[r]`, in order r = 0, 1, ...
void copy_rows(const uint8_t* from, uint8_t* to, const isa::Block& table, const isa::Block& vmem,
               const std::vector<uint64_t>& rows, bool to_vmem) {
  const uint64_t row_bytes = static_cast<uint64_t>(vmem.cols()) * dtype_bytes(vmem.dtype());
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint64_t at_table = table.address() + rows[r] * row_stride(table);
    const uint64_t at_vmem = vmem.address() + r * row_stride(vmem);
    if (to_vmem) {
      std::memcpy(to + at_vmem, from + at_table, row_bytes);
    } else {
      std::memcpy(to + at_table, from + at_vmem, row_bytes);
    }
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

double DmaEngine::indexed_hbm_end(double start, const isa::Dma& dma, const isa::Block& table,
                                  const isa::Block& vmem) {
  // One request per row (a descriptor each), charged at table row r mod rows: isa.proto says why.
  // Packed bf16 rows are half as long and, in the table a TPU packs, half as far apart.
  const uint64_t halve = dma.packed_bf16() ? 2 : 1;
  const uint64_t row_bytes = static_cast<uint64_t>(vmem.cols()) * dtype_bytes(vmem.dtype()) / halve;
  const uint64_t stride = row_stride(table) / halve;
  double end = start;
  for (uint32_t r = 0; r < vmem.rows(); ++r) {
    const uint64_t address = table.address() + (r % table.rows()) * stride;
    end = std::max(end, hbm_.transfer(start, address, row_bytes));
  }
  return end;
}

void DmaEngine::post_copy(const isa::Dma& dma, bool to_vmem) {
  const isa::Block& src = dma.src();
  const isa::Block& dst = dma.dst();
  // An indexed DMA's indices are read here, once the core's jobs that write them are done (and
  // before the bases below are taken: a growing store may move); its job moves the rows named.
  std::vector<uint64_t> rows;
  if (dma.has_index()) {
    const isa::Block& index = dma.index();
    numerics_.before_vmem_access(&index, nullptr);
    rows = table_rows_of(vmem_.memory().base_covering(index.address(), end_address(index)), index,
                         (to_vmem ? src : dst).rows());
  }
  Memory& src_mem = to_vmem ? hbm_.memory() : vmem_.memory();
  Memory& dst_mem = to_vmem ? vmem_.memory() : hbm_.memory();
  const uint8_t* from = src_mem.base_covering(src.address(), end_address(src));
  uint8_t* to = dst_mem.base_covering(dst.address(), end_address(dst));
  if (to_vmem) vmem_.note_write(dst.address(), end_address(dst));
  if (!dma.has_index()) {
    numerics_.post(true, host_range(from, src), host_range(to, dst),
                   [from, to, &src, &dst] { copy_block(from, src, to, dst); });
    return;
  }
  const isa::Block& table = to_vmem ? src : dst;
  const isa::Block& vmem = to_vmem ? dst : src;
  numerics_.post(true, host_range(from, src), host_range(to, dst),
                 [from, to, &table, &vmem, rows = std::move(rows), to_vmem] {
                   copy_rows(from, to, table, vmem, rows, to_vmem);
                 });
}

void DmaEngine::execute(const IssuedInstruction& item) {
  const isa::Dma& dma = item.instr->dma();
  const bool to_vmem = dma.direction() == isa::Dma::HBM_TO_VMEM;
  const isa::Block& hbm_block = to_vmem ? dma.src() : dma.dst();
  const isa::Block& vmem_block = to_vmem ? dma.dst() : dma.src();
  // Packed bf16 values are charged at 2 bytes an element (a TPU's bf16 buffer); their f32
  // words still move whole below. An indexed DMA moves the VMEM block's rows, not its table.
  const uint64_t bytes =
      payload_bytes(dma.has_index() ? vmem_block : hbm_block) / (dma.packed_bf16() ? 2 : 1);
  vmem_.touch(end_address(vmem_block));
  if (dma.has_index()) vmem_.touch(end_address(dma.index()));
  const uint64_t start = ctx_.now_cycle();

  const double hbm_end =
      dma.has_index() ? indexed_hbm_end(static_cast<double>(start), dma, hbm_block, vmem_block)
                      : hbm_.transfer(static_cast<double>(start), hbm_block.address(), bytes);
  const double vmem_end = vmem_.ports().reserve(static_cast<double>(start), bytes).end;
  const auto done = ceil_cycle(std::max(hbm_end, vmem_end));
  // The engine keeps its requests in flight: it takes the next transfer once this one's last
  // request has been served by the channels, not once its data has come back an access latency
  // later (dma_engine.h).
  const auto issued = ceil_cycle(std::max(
      {hbm_end - hbm_.timing().latency_cycles(), vmem_end, static_cast<double>(start)}));

  if (!ctx_.timing_only()) post_copy(dma, to_vmem);
  bytes_ += bytes;
  hbm_.bandwidth().add_bytes(ctx_.clock().time_of(Cycles(start)),
                             ctx_.clock().time_of(Cycles(done)), static_cast<double>(bytes));
  busy_cycles_ += done - start;
  trace(op_name(*item.instr), start, done);
  profile(start, done, {0, static_cast<double>(bytes)});
  ctx_.sync().complete_at(done, item.instr->signal());
  wait_until(issued);
}

}  // namespace tpusim::sim
