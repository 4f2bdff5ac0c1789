#pragma once
// A DMA engine: copies a block between the chip's HBM and the core's VMEM, or gathers or
// scatters table rows by index (isa.proto, Dma.index). Its time is set by the HBM channels
// (shared with every engine of the chip, plus the access latency; an indexed DMA makes one
// request per row) and the VMEM ports (shared with the core's other units), whichever finishes
// later. The engine takes transfers one at a time in order, but keeps each one's requests in
// flight: it takes the next once the channels have served this one's requests, not once its data
// has come back an access latency later (docs/simulator.md, "Timing model").

#include "sim/units/core_memory.h"
#include "sim/units/unit.h"

namespace tpusim::sim {

// What a DMA engine moves bytes between, and where its work goes.
struct DmaWiring {
  CoreVmem& vmem;          // the core's VMEM and its ports
  CoreHbm& hbm;            // the chip's HBM and channels, the run's mirrors, the bandwidth track
  CoreNumerics& numerics;  // copies the bytes (functional runs)
};

class DmaEngine final : public Unit {
 public:
  DmaEngine(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
            DmaWiring wiring);

 private:
  void execute(const IssuedInstruction& item) override;
  // When an indexed DMA's last row has moved on the HBM channels, its rows requested at `start`.
  double indexed_hbm_end(double start, const isa::Dma& dma, const isa::Block& table,
                         const isa::Block& vmem);
  // Posts the DMA's functional copy (functional runs only).
  void post_copy(const isa::Dma& dma, bool to_vmem);
  CoreVmem& vmem_;
  CoreHbm& hbm_;
  CoreNumerics& numerics_;
  uint64_t bytes_ = 0;
};

}  // namespace tpusim::sim
