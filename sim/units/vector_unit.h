#pragma once
// The vector unit: lanes x sublanes f32 ALUs. An op over E elements issues ceil(E / (lanes x
// sublanes)) vregs, each costing 1 cycle (divide and transcendentals cost more, per the core
// config); results are out after the pipeline latency (plus the transcendental latency). Its
// VMEM traffic goes through the core's VMEM ports. Numerics in f32 with Eigen arrays.

#include "configs/slice_spec.h"
#include "sim/memory/block.h"
#include "sim/units/core_memory.h"
#include "sim/units/unit.h"

namespace tpusim::sim {

// Issue cycles of one vector instruction (before VMEM and latency): exposed for tests.
uint64_t vector_issue_cycles(const isa::Vector& v, const config::CoreSpec& core);

// What the vector unit reads and writes, and the figures its timing comes from.
struct VectorWiring {
  const config::CoreSpec& spec;  // lanes, sublanes, per-op cycles and latencies
  CoreVmem& vmem;                // the core's VMEM and its ports
  CoreNumerics& numerics;        // computes the ops (functional runs)
};

class VectorUnit final : public Unit {
 public:
  VectorUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
             VectorWiring wiring);

 private:
  void execute(const IssuedInstruction& item) override;
  // Posts the op's numerics to the NumericsWorker.
  void post_compute(const isa::Vector& v);
  // The job: `v` on the VMEM at `vmem`; `step` seeds RNG ops.
  static void compute(uint8_t* vmem, const isa::Vector& v, uint64_t step);
  const config::CoreSpec& spec_;
  CoreVmem& vmem_;
  CoreNumerics& numerics_;
  uint64_t elements_ = 0;
};

}  // namespace tpusim::sim
