#pragma once
// The PCIe link between the host and one chip, each direction with its own bandwidth. Host to
// device: batches the host made ready (at a given cycle) go over the link in the order they
// became ready, each into its core's bounded infeed queue; a full queue holds the link up
// (back-pressure). Device to host: outfeed entries leave the chip's cores in the order they
// were enqueued and land in a host-side outbox per core.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <systemc>
#include <vector>

#include "sim/chip/core.h"
#include "sim/stats/stat_group.h"
#include "traces/sink.h"

namespace tpusim::sim {

class HostLink : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(HostLink);
  // With a sink, each host-to-device transfer is an "h2d" slice on the chip's "host_link" track
  // (traces/analysis_events.h): what the step analyzer charges the link per step.
  HostLink(const sc_core::sc_module_name& name, const config::ChipSpec& chip,
           const ClockDomain& clock, std::vector<Core*> cores, sc_core::sc_event& outfeed_pushed,
           StatGroup& stats, traces::Sink* sink = nullptr, int chip_index = 0);

  // Queues a host batch for `core_on_chip`, ready to send at `ready_cycle`; `on_delivered` (may
  // be empty) runs when it is in the core's infeed queue.
  void send(uint32_t core_on_chip, FeedEntry entry, uint64_t ready_cycle,
            std::function<void()> on_delivered = {});
  // Entries that reached the host from `core_on_chip`, oldest first; the outbox empties.
  std::vector<FeedEntry> take_outbox(uint32_t core_on_chip);
  // Host batches not yet delivered to `core_on_chip`'s infeed queue.
  size_t pending_for(uint32_t core_on_chip) const;
  // After a failed run, before its threads restart: no batch waiting to cross, no outfeed
  // entry held for the host.
  void abandon_run();

 private:
  struct Pending {
    uint32_t core;
    FeedEntry entry;
    uint64_t ready_cycle;
    std::function<void()> on_delivered;
  };
  void host_to_device();
  void device_to_host();
  void wait_until(uint64_t cycle);
  uint64_t now_cycle() const;
  uint64_t transfer_cycles(uint64_t bytes, double bytes_per_s) const;

  const config::ChipSpec& chip_;
  const ClockDomain& clock_;
  std::vector<Core*> cores_;
  sc_core::sc_event& outfeed_pushed_;
  std::multimap<std::pair<uint64_t, uint64_t>, Pending> pending_;  // by (ready, arrival order)
  uint64_t arrivals_ = 0;
  sc_core::sc_event host_ready_;
  std::vector<std::deque<FeedEntry>> outbox_;
  uint64_t h2d_bytes_ = 0, d2h_bytes_ = 0;
  uint64_t h2d_busy_ = 0, d2h_busy_ = 0, h2d_blocked_ = 0;
  traces::Sink* sink_ = nullptr;
  traces::TrackId track_{};
};

}  // namespace tpusim::sim
