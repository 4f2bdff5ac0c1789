#pragma once
// The host's infeed thread (TPUEstimator's enqueue loop): it takes each step's host batches in
// step order and hands them to the chips' host links. Step k is taken once the host has it
// ready and every entry of step k-1 is in its core's infeed queue: an enqueue returns when its
// transfer is done, and a full queue holds it. The host hears when each step was taken, because
// taking a batch frees a slot of the host's bounded prefetch buffer, and that decides when later
// batches can be ready: a host can run ahead of the device only as far as its buffers allow.
//
// Each host of the slice has one (System), and a step is the batches of every core it feeds
// (the runtime calls a step ready when the last of the host's input pipelines has its batch):
// hosts take their steps independently, and a late host holds up only its own chips' infeed
// (and through them, the collectives its replicas join).

#include <cstdint>
#include <deque>
#include <systemc>
#include <vector>

#include "sim/chip/host_link.h"
#include "sim/chip/infeed_step.h"
#include "sim/clock.h"
#include "sim/core_map.h"

namespace tpusim::sim {

class HostInfeed : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(HostInfeed);
  // `links`: each chip's host link (every chip of the slice), indexed by chip; `map` says which
  // chip's link carries a core's entries.
  HostInfeed(const sc_core::sc_module_name& name, const ClockDomain& clock,
             std::vector<HostLink*> links, const CoreMap& map);

  void queue(InfeedStep step);
  // Steps not yet taken, and whether the thread is waiting for a taken step's transfers.
  size_t steps_pending() const { return steps_.size(); }
  bool delivering() const { return outstanding_ > 0; }
  // After a failed run, before its thread restarts: no step left to take or deliver.
  void abandon_run() {
    steps_.clear();
    outstanding_ = 0;
  }

 private:
  void run();
  uint64_t now_cycle() const;

  const ClockDomain& clock_;
  std::vector<HostLink*> links_;
  CoreMap map_;
  std::deque<InfeedStep> steps_;
  sc_core::sc_event queued_;
  size_t outstanding_ = 0;  // entries of the taken step not yet in their infeed queues
  sc_core::sc_event delivered_;
};

}  // namespace tpusim::sim
