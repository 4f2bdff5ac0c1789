#include "sim/timing/hbm_timing.h"

#include <algorithm>

namespace tpusim::sim {

HbmTiming::HbmTiming(uint32_t channels, double bytes_per_cycle, uint64_t interleave_bytes,
                     double latency_cycles)
    : channels_(channels, BandwidthServer(bytes_per_cycle / channels)),
      interleave_bytes_(interleave_bytes),
      latency_cycles_(latency_cycles) {}

double HbmTiming::transfer(double now, uint64_t address, uint64_t bytes) {
  if (bytes == 0) return now;
  const uint64_t n = channels_.size();
  const uint64_t granules =
      (address % interleave_bytes_ + bytes + interleave_bytes_ - 1) / interleave_bytes_;
  const uint64_t touched = std::min<uint64_t>(n, granules);
  const uint64_t first = (address / interleave_bytes_) % n;
  const double share = static_cast<double>(bytes) / static_cast<double>(touched);
  if (touched == n && !in_step_) {  // back in step once every channel is idle
    in_step_ = std::all_of(channels_.begin(), channels_.end(),
                           [now](const BandwidthServer& c) { return c.free_at() <= now; });
    if (in_step_) shared_free_at_ = now;
  }
  if (in_step_) {
    if (touched == n) {
      const double duration = share / channels_.front().bytes_per_cycle();
      shared_free_at_ = std::max(now, shared_free_at_) + duration;
      shared_busy_ += duration;
      shared_bytes_ += share;
      return shared_free_at_ + latency_cycles_;
    }
    for (BandwidthServer& c : channels_) c.hold_until(shared_free_at_);
    in_step_ = false;
  }
  double end = now;
  for (uint64_t i = 0; i < touched; ++i) {
    end = std::max(end, channels_[(first + i) % n].reserve(now, share).end);
  }
  return end + latency_cycles_;
}

double HbmTiming::bytes_served() const {
  double total = shared_bytes_ * static_cast<double>(channels_.size());
  for (const auto& c : channels_) total += c.bytes_served();
  return total;
}

double HbmTiming::busiest_channel_cycles() const {
  double busiest = 0;
  for (const auto& c : channels_) busiest = std::max(busiest, c.busy_cycles());
  return busiest + shared_busy_;
}

void HbmTiming::forget_reservations() {
  for (auto& c : channels_) c.forget_reservations();
  in_step_ = true;
  shared_free_at_ = 0;
}

void HbmTiming::reset_stats() {
  shared_busy_ = shared_bytes_ = 0;
  for (auto& c : channels_) c.reset_stats();
}

}  // namespace tpusim::sim
