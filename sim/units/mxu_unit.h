#pragma once
// A matrix unit: an R x C weight-stationary systolic array with two weight buffers. Timing comes
// from its MxuTimingPolicy (sim/timing/mxu_policy.h), bounded by the VMEM ports that feed it;
// numerics are bf16 inputs with f32 accumulation, 1, 3 or 6 bf16 passes by precision, computed
// with Eigen on the whole tile, as jobs on the slice's NumericsWorker thread.

#include <array>
#include <memory>

#include "sim/memory/block.h"
#include "sim/timing/mxu_policy.h"
#include "sim/units/core_memory.h"
#include "sim/units/unit.h"

namespace tpusim::sim {

// What an MXU reads and writes.
struct MxuWiring {
  CoreVmem& vmem;          // the core's VMEM, its ports and the LHS cache the MXUs share
  CoreNumerics& numerics;  // computes the products (functional runs)
};

class MxuUnit final : public Unit {
 public:
  MxuUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats, MxuWiring wiring,
          std::unique_ptr<MxuTimingPolicy> policy);

  uint64_t macs() const { return macs_; }
  // Swaps the timing policy between runs (the array's pipeline state starts afresh).
  void set_policy(std::unique_ptr<MxuTimingPolicy> policy) { policy_ = std::move(policy); }

 private:
  void execute(const IssuedInstruction& item) override;
  void load_weights(const IssuedInstruction& item);
  void matmul(const IssuedInstruction& item);
  // On the simulation thread: decides whether the core's LHS cache holds the matmul's operand
  // and posts the job that computes it.
  void post_compute(const isa::Matmul& mm);
  // Jobs (see NumericsWorker): one group's product into VMEM (isa.proto, Matmul.groups: `lhs`
  // and `out` are the group's), after splitting the LHS into `terms` bf16 terms in the core's
  // LHS cache when `refill_lhs`.
  void compute(uint8_t* vmem, const isa::Matmul& mm, const isa::Block& lhs, const isa::Block& out,
               bool refill_lhs, int terms);
  void split_lhs(const uint8_t* vmem, const isa::Block& lhs, int terms);

  CoreVmem& vmem_;
  CoreNumerics& numerics_;
  std::unique_ptr<MxuTimingPolicy> policy_;
  // The weights' bf16 terms in `slot`, rounded from the loaded f32 values on first use.
  const std::array<MatrixF, 3>& weight_terms(uint32_t slot, int terms);

  // Per slot: the loaded weights (f32), their bf16 terms (f32 matrices holding bf16 values)
  // and how many of the terms are computed. Touched by jobs only, like lhs_.
  std::array<MatrixF, 2> weight_source_;
  std::array<std::array<MatrixF, 3>, 2> weights_;
  std::array<int, 2> weight_terms_{};
  MatrixF lhs_;                 // scratch for the f32 lhs before it is split
  uint64_t macs_ = 0;           // useful multiply-accumulates (M x K x N per matmul)
  uint64_t stream_cycles_ = 0;  // cycles the array input was streaming
  uint64_t weight_loads_ = 0;
};

}  // namespace tpusim::sim
