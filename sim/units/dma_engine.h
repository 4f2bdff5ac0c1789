#pragma once
// A DMA engine: copies a block between the chip's HBM and the core's VMEM. Its time is set by
// the HBM channels (shared with every engine of the chip, plus the access latency) and the VMEM
// ports (shared with the core's other units), whichever finishes later; the engine runs one
// transfer at a time.

#include "sim/units/unit.h"

namespace tpusim::sim {

class DmaEngine final : public Unit {
 public:
  DmaEngine(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats);

 private:
  void execute(const IssuedInstruction& item) override;
  uint64_t bytes_ = 0;
};

}  // namespace tpusim::sim
