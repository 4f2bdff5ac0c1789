#pragma once
// What the host hands its infeed thread (sim/chip/host_infeed.h): one step's batches for the
// cores, and who says when they are ready.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/ids.h"
#include "sim/units/feed_queue.h"

namespace tpusim::sim {

// When the host has each step's batches ready. Asked for step k only after step k-1 was taken.
class HostFeed {
 public:
  virtual ~HostFeed() = default;
  // The cycle (absolute) step `step` is ready on the host; earlier is "at once".
  virtual uint64_t ready_cycle(uint64_t step) = 0;
  // The infeed thread took step `step` at `cycle`.
  virtual void taken(uint64_t step, uint64_t cycle) = 0;
};

struct InfeedStep {
  // (core, entry) in the order they cross their chips' links.
  std::vector<std::pair<CoreId, FeedEntry>> entries;
  std::shared_ptr<HostFeed> feed;  // null: ready at `ready_cycle`
  uint64_t index = 0;              // the step's number for `feed`
  uint64_t ready_cycle = 0;
  // The host whose infeed thread takes the step: each host of the slice has its own and takes
  // its steps on its own, as TPUEstimator's per-host enqueue threads do. Its entries are for
  // that host's chips when the host's input is its own; a step of input shared by every host
  // goes whole to host 0's thread (the links still carry each entry to its own chip).
  uint32_t host = 0;
};

}  // namespace tpusim::sim
