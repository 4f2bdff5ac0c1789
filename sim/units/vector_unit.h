#pragma once
// The vector unit: lanes x sublanes element slots of f32 ALUs. An instruction's issue cycles and
// VMEM traffic are vector_cost.h's: one op a cycle per vreg for a single op, `vector_alus` a
// cycle for a chain's steps, whose values stay in registers between them. Results are out after
// the pipeline latency (plus the transcendental latency); the VMEM traffic goes through the
// core's VMEM ports. Numerics in f32 with Eigen arrays, a chain's steps one after the other.

#include "configs/slice_spec.h"
#include "sim/memory/block.h"
#include "sim/units/core_memory.h"
#include "sim/units/unit.h"
#include "sim/units/vector_cost.h"

namespace tpusim::sim {

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
