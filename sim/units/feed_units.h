#pragma once
// The infeed and outfeed units of a core. Infeed dequeue waits while the core's infeed queue is
// empty (counted as infeed wait cycles: the device starved for input), then writes the entry
// into VMEM. Outfeed enqueue waits while the outfeed queue is full (outfeed wait cycles), then
// reads the block from VMEM and queues it for the host link.

#include "sim/units/unit.h"

namespace tpusim::sim {

class InfeedUnit final : public Unit {
 public:
  InfeedUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats);
  uint64_t wait_cycles() const { return wait_cycles_; }

 private:
  void execute(const IssuedInstruction& item) override;
  uint64_t wait_cycles_ = 0;
  uint64_t bytes_ = 0;
};

class OutfeedUnit final : public Unit {
 public:
  OutfeedUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats);
  uint64_t wait_cycles() const { return wait_cycles_; }

 private:
  void execute(const IssuedInstruction& item) override;
  uint64_t wait_cycles_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace tpusim::sim
