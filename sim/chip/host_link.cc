#include "sim/chip/host_link.h"

#include <cmath>

#include "traces/analysis_events.h"

namespace tpusim::sim {

HostLink::HostLink(const sc_core::sc_module_name& name, const config::ChipSpec& chip,
                   const ClockDomain& clock, std::vector<Core*> cores,
                   sc_core::sc_event& outfeed_pushed, StatGroup& stats, traces::Sink* sink,
                   int chip_index)
    : sc_module(name),
      chip_(chip),
      clock_(clock),
      cores_(std::move(cores)),
      outfeed_pushed_(outfeed_pushed),
      outbox_(cores_.size()),
      sink_(sink) {
  if (sink_ != nullptr) {
    track_ = sink_->declare_track(
        {traces::TrackInfo::Kind::kUnit, chip_index, -1, std::string(traces::kHostLinkTrack), ""});
  }
  SC_THREAD(host_to_device);
  SC_THREAD(device_to_host);
  StatGroup& s = stats.child(basename(), "PCIe link between the host and this chip");
  s.add("host_to_device_bytes", "bytes", "infeed bytes sent to the chip",
        [this] { return static_cast<double>(h2d_bytes_); });
  s.add("device_to_host_bytes", "bytes", "outfeed bytes sent to the host",
        [this] { return static_cast<double>(d2h_bytes_); });
  s.add("host_to_device_busy_cycles", "cycles",
        "cycles the host-to-device direction was transferring",
        [this] { return static_cast<double>(h2d_busy_); });
  s.add("device_to_host_busy_cycles", "cycles",
        "cycles the device-to-host direction was transferring",
        [this] { return static_cast<double>(d2h_busy_); });
  s.add("host_to_device_blocked_cycles", "cycles",
        "cycles a ready batch waited for room in a full infeed queue",
        [this] { return static_cast<double>(h2d_blocked_); });
  s.on_reset([this] { h2d_bytes_ = d2h_bytes_ = h2d_busy_ = d2h_busy_ = h2d_blocked_ = 0; });
}

uint64_t HostLink::now_cycle() const {
  return clock_.cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
}

void HostLink::wait_until(uint64_t cycle) {
  const uint64_t target = clock_.time_of(Cycles(cycle));
  const uint64_t now = sc_core::sc_time_stamp().value();
  if (target > now) wait(sc_core::sc_time(static_cast<double>(target - now), sc_core::SC_PS));
}

uint64_t HostLink::transfer_cycles(uint64_t bytes, double bytes_per_s) const {
  return clock_
      .cycles_for_seconds(static_cast<double>(bytes) / bytes_per_s + chip_.host_link.latency_s)
      .value;
}

void HostLink::send(uint32_t core_on_chip, FeedEntry entry, uint64_t ready_cycle,
                    std::function<void()> on_delivered) {
  pending_.emplace(std::make_pair(ready_cycle, arrivals_++),
                   Pending{core_on_chip, std::move(entry), ready_cycle, std::move(on_delivered)});
  host_ready_.notify(sc_core::SC_ZERO_TIME);
}

std::vector<FeedEntry> HostLink::take_outbox(uint32_t core_on_chip) {
  std::vector<FeedEntry> out(std::make_move_iterator(outbox_[core_on_chip].begin()),
                             std::make_move_iterator(outbox_[core_on_chip].end()));
  outbox_[core_on_chip].clear();
  return out;
}

size_t HostLink::pending_for(uint32_t core_on_chip) const {
  size_t n = 0;
  for (const auto& [key, p] : pending_) n += p.core == core_on_chip ? 1 : 0;
  return n;
}

void HostLink::abandon_run() {
  pending_.clear();
  for (auto& box : outbox_) box.clear();
}

void HostLink::host_to_device() {
  for (;;) {
    while (pending_.empty()) wait(host_ready_);
    auto it = pending_.begin();
    if (it->second.ready_cycle > now_cycle()) {
      // Sleep until the earliest batch is ready, or until the host queues an earlier one.
      const uint64_t target = clock_.time_of(Cycles(it->second.ready_cycle));
      wait(sc_core::sc_time(static_cast<double>(target - sc_core::sc_time_stamp().value()),
                            sc_core::SC_PS),
           host_ready_);
      continue;
    }
    Pending batch = std::move(it->second);
    pending_.erase(it);
    FeedQueue& queue = cores_[batch.core]->infeed();
    if (queue.full()) {
      const uint64_t from = now_cycle();
      while (queue.full()) wait(queue.changed);
      h2d_blocked_ += now_cycle() - from;
    }
    const uint64_t cycles =
        transfer_cycles(batch.entry.bytes, chip_.host_link.host_to_device_bytes_per_s);
    const uint64_t start = now_cycle();
    wait_until(start + cycles);
    if (sink_ != nullptr && sink_->recording()) {
      sink_->slice(track_, traces::kHostToDevice, clock_.time_of(Cycles(start)),
                   clock_.time_of(Cycles(start + cycles)));
    }
    h2d_busy_ += cycles;
    h2d_bytes_ += batch.entry.bytes;
    batch.entry.enqueued_cycle = now_cycle();
    queue.push(std::move(batch.entry));
    if (batch.on_delivered) batch.on_delivered();
  }
}

void HostLink::device_to_host() {
  for (;;) {
    // The oldest entry of any core's outfeed queue goes first.
    Core* from = nullptr;
    uint32_t from_index = 0;
    for (;;) {
      for (uint32_t c = 0; c < cores_.size(); ++c) {
        FeedQueue& q = cores_[c]->outfeed();
        if (!q.empty() && (from == nullptr || q.entries.front().enqueued_cycle <
                                                  from->outfeed().entries.front().enqueued_cycle)) {
          from = cores_[c];
          from_index = c;
        }
      }
      if (from != nullptr) break;
      wait(outfeed_pushed_);
    }
    const uint64_t bytes = from->outfeed().entries.front().bytes;
    const uint64_t cycles = transfer_cycles(bytes, chip_.host_link.device_to_host_bytes_per_s);
    wait_until(now_cycle() + cycles);
    d2h_busy_ += cycles;
    d2h_bytes_ += bytes;
    outbox_[from_index].push_back(from->outfeed().pop());
  }
}

}  // namespace tpusim::sim
