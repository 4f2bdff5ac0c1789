// HbmTiming's shared schedule for requests that span every channel gives the same times and
// statistics as serving each channel on its own, through requests on some channels and back.
#include "sim/timing/hbm_timing.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace hbm_timing_test {

// The definition: every touched channel serves its share in arrival order.
struct PerChannel {
  std::vector<BandwidthServer> channels;
  uint64_t interleave;
  double latency;
  double transfer(double now, uint64_t address, uint64_t bytes) {
    const uint64_t n = channels.size();
    const uint64_t touched =
        std::min<uint64_t>(n, (address % interleave + bytes + interleave - 1) / interleave);
    double end = now;
    for (uint64_t i = 0; i < touched; ++i) {
      end = std::max(end, channels[(address / interleave + i) % n]
                              .reserve(now, static_cast<double>(bytes) / touched)
                              .end);
    }
    return end + latency;
  }
};

TEST(HbmTiming, SpanningRequestsInStepMatchEveryChannelServedAlone) {
  HbmTiming hbm(8, 64.0, 256, 100);
  PerChannel ref{std::vector<BandwidthServer>(8, BandwidthServer(8.0)), 256, 100};
  struct Request {
    double now;
    uint64_t address, bytes;
  };
  // Spanning requests back to back, a partial one (out of step), spanning ones while channels
  // are still busy (stay out), a pause (every channel idle: back in step), more spanning ones.
  const std::vector<Request> requests = {
      {0, 0, 4096},     {10, 2048, 8192},  {20, 512, 300}, {25, 0, 2048},    {30, 256, 4096},
      {5000, 0, 16384}, {5001, 128, 2048}, {5002, 0, 100}, {9000, 0, 65536}, {9000, 768, 4096},
  };
  for (const Request& r : requests) {
    EXPECT_DOUBLE_EQ(hbm.transfer(r.now, r.address, r.bytes),
                     ref.transfer(r.now, r.address, r.bytes))
        << "request at " << r.now;
  }
  double bytes = 0, busiest = 0;
  for (const BandwidthServer& c : ref.channels) {
    bytes += c.bytes_served();
    busiest = std::max(busiest, c.busy_cycles());
  }
  EXPECT_DOUBLE_EQ(hbm.bytes_served(), bytes);
  EXPECT_DOUBLE_EQ(hbm.busiest_channel_cycles(), busiest);
  hbm.reset_stats();
  EXPECT_EQ(hbm.bytes_served(), 0);
  EXPECT_EQ(hbm.busiest_channel_cycles(), 0);
}

}  // namespace hbm_timing_test
}  // namespace tpusim::sim
