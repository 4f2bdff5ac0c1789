#pragma once
// Lowers a SCALE-Sim layer to one MXU of one core the way SCALE-Sim maps it: the K x N
// stationary operand is cut into ceil(K / R) x ceil(N / C) folds; each fold loads its weights
// and streams the layer's T rows through them. Used timing-only (`tpusim layers`): the operands
// share VMEM buffers, so a layer needs T x R (bf16) + T x C (f32) bytes of VMEM.

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "runtime/workloads/scalesim_topology.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::runtime {

struct LayerProgram {
  isa::Program program;
  uint64_t folds = 0;
};

absl::StatusOr<LayerProgram> lower_weight_stationary_layer(const config::SliceSpec& slice,
                                                           uint32_t core,
                                                           const TopologyLayer& layer);

}  // namespace tpusim::runtime
