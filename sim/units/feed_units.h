#pragma once
// The infeed and outfeed units of a core. Infeed dequeue waits while the core's infeed queue is
// empty (counted as infeed wait cycles: the device starved for input), then writes the entry
// into VMEM. Outfeed enqueue waits while the outfeed queue is full (outfeed wait cycles), then
// reads the block from VMEM and queues it for the host link.

#include <systemc>

#include "sim/units/core_memory.h"
#include "sim/units/feed_queue.h"
#include "sim/units/unit.h"

namespace tpusim::sim {

// What the infeed unit takes entries from and writes them into.
struct InfeedWiring {
  FeedQueue& queue;        // the core's infeed queue (the host link fills it)
  CoreVmem& vmem;          // the core's VMEM and its ports
  CoreNumerics& numerics;  // writes the entries (functional runs)
};

// What the outfeed unit reads blocks from and queues them on.
struct OutfeedWiring {
  FeedQueue& queue;           // the core's outfeed queue (the host link drains it)
  sc_core::sc_event& pushed;  // the chip's: wakes the host link
  CoreVmem& vmem;             // the core's VMEM and its ports
  CoreNumerics& numerics;     // the jobs a read waits for (functional runs)
};

class InfeedUnit final : public Unit {
 public:
  InfeedUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
             InfeedWiring wiring);
  uint64_t wait_cycles() const { return wait_cycles_; }

 private:
  void execute(const IssuedInstruction& item) override;
  FeedQueue& feed_;
  CoreVmem& vmem_;
  CoreNumerics& numerics_;
  uint64_t wait_cycles_ = 0;
  uint64_t bytes_ = 0;
};

class OutfeedUnit final : public Unit {
 public:
  OutfeedUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
              OutfeedWiring wiring);
  uint64_t wait_cycles() const { return wait_cycles_; }

 private:
  void execute(const IssuedInstruction& item) override;
  FeedQueue& feed_;
  sc_core::sc_event& pushed_;
  CoreVmem& vmem_;
  CoreNumerics& numerics_;
  uint64_t wait_cycles_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace tpusim::sim
