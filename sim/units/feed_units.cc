#include "sim/units/feed_units.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/strings.h"
#include "sim/memory/block.h"
#include "traces/analysis_events.h"

namespace tpusim::sim {

InfeedUnit::InfeedUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
                       InfeedWiring wiring)
    : Unit(name, ctx, stats, "infeed: host batches into VMEM"),
      feed_(wiring.queue),
      vmem_(wiring.vmem),
      numerics_(wiring.numerics) {
  stats_.add("wait_cycles", "cycles", "cycles an infeed dequeue waited for the host (queue empty)",
             [this] { return static_cast<double>(wait_cycles_); });
  stats_.add("bytes", "bytes", "bytes dequeued into VMEM",
             [this] { return static_cast<double>(bytes_); });
  stats_.on_reset([this] {
    wait_cycles_ = 0;
    bytes_ = 0;
  });
}

void InfeedUnit::execute(const IssuedInstruction& item) {
  const isa::Block& dst = item.instr->infeed().dst();
  vmem_.touch(end_address(dst));
  FeedQueue& queue = feed_;
  if (queue.empty()) {
    const uint64_t from = ctx_.now_cycle();
    set_blocked(
        "waits for an infeed entry: the core's infeed queue is empty and the host has "
        "not sent one");
    while (queue.empty()) wait(queue.changed);
    set_blocked("");
    wait_cycles_ += ctx_.now_cycle() - from;
    trace(traces::kInfeedWait.data(), from, ctx_.now_cycle());
  }
  FeedEntry entry = queue.pop();
  const uint64_t bytes = payload_bytes(dst);
  if (entry.bytes != bytes) {
    ctx_.fail(str_cat("core ", index(ctx_.core()), " instruction ", item.index,
                      " (infeed.dequeue): the infeed entry holds ", entry.bytes,
                      " bytes but the destination block takes ", bytes));
    return;
  }
  const uint64_t start = ctx_.now_cycle();
  const double vmem_end =
      vmem_.ports().reserve(static_cast<double>(start), static_cast<double>(bytes)).end;
  const auto done = std::max(start + 1, ceil_cycle(vmem_end));
  if (!ctx_.timing_only() && !entry.data.empty()) {
    uint8_t* vmem = vmem_.memory().base_covering(dst.address(), end_address(dst));
    vmem_.note_write(dst.address(), end_address(dst));
    auto data = std::make_shared<std::vector<uint8_t>>(std::move(entry.data));
    numerics_.post(false, HostRange{}, host_range(vmem, dst), [vmem, &dst, data] {
      const uint64_t row_bytes = static_cast<uint64_t>(dst.cols()) * dtype_bytes(dst.dtype());
      for (uint32_t r = 0; r < dst.rows(); ++r) {
        std::memcpy(vmem + dst.address() + r * row_stride(dst), data->data() + r * row_bytes,
                    row_bytes);
      }
    });
  }
  bytes_ += bytes;
  busy_cycles_ += done - start;
  trace("infeed.dequeue", start, done);
  profile(start, done);
  ctx_.sync().complete_at(done, item.instr->signal());
  wait_until(done);
}

OutfeedUnit::OutfeedUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
                         OutfeedWiring wiring)
    : Unit(name, ctx, stats, "outfeed: VMEM blocks to the host"),
      feed_(wiring.queue),
      pushed_(wiring.pushed),
      vmem_(wiring.vmem),
      numerics_(wiring.numerics) {
  stats_.add("wait_cycles", "cycles", "cycles an outfeed enqueue waited for room (queue full)",
             [this] { return static_cast<double>(wait_cycles_); });
  stats_.add("bytes", "bytes", "bytes enqueued for the host",
             [this] { return static_cast<double>(bytes_); });
  stats_.on_reset([this] {
    wait_cycles_ = 0;
    bytes_ = 0;
  });
}

void OutfeedUnit::execute(const IssuedInstruction& item) {
  const isa::Block& src = item.instr->outfeed().src();
  vmem_.touch(end_address(src));
  FeedQueue& queue = feed_;
  if (queue.full()) {
    const uint64_t from = ctx_.now_cycle();
    set_blocked("waits for room in the outfeed queue: the host link has not drained it");
    while (queue.full()) wait(queue.changed);
    set_blocked("");
    wait_cycles_ += ctx_.now_cycle() - from;
    trace(traces::kOutfeedWait.data(), from, ctx_.now_cycle());
  }
  const uint64_t bytes = payload_bytes(src);
  const uint64_t start = ctx_.now_cycle();
  const double vmem_end =
      vmem_.ports().reserve(static_cast<double>(start), static_cast<double>(bytes)).end;
  const auto done = std::max(start + 1, ceil_cycle(vmem_end));
  FeedEntry entry;
  entry.bytes = bytes;
  if (!ctx_.timing_only()) {
    entry.data.resize(bytes);
    numerics_.before_vmem_access(&src, nullptr);
    const uint8_t* vmem = vmem_.memory().base_covering(src.address(), end_address(src));
    const uint64_t row_bytes = static_cast<uint64_t>(src.cols()) * dtype_bytes(src.dtype());
    for (uint32_t r = 0; r < src.rows(); ++r) {
      std::memcpy(entry.data.data() + r * row_bytes, vmem + src.address() + r * row_stride(src),
                  row_bytes);
    }
  }
  bytes_ += bytes;
  busy_cycles_ += done - start;
  trace("outfeed.enqueue", start, done);
  profile(start, done);
  wait_until(done);
  entry.enqueued_cycle = done;
  queue.push(std::move(entry));
  pushed_.notify(sc_core::SC_ZERO_TIME);
  ctx_.sync().complete_at(done, item.instr->signal());
}

}  // namespace tpusim::sim
