#include "runtime/lowering/weight_stationary_layers.h"

#include <algorithm>

#include "common/align.h"
#include "common/strings.h"
#include "sim/isa/builder.h"

namespace tpusim::runtime {

absl::StatusOr<LayerProgram> lower_weight_stationary_layer(const config::SliceSpec& slice,
                                                           uint32_t core,
                                                           const TopologyLayer& layer) {
  const config::CoreSpec& spec = slice.chip.core;
  const uint64_t R = spec.mxu_rows, C = spec.mxu_cols;
  const uint64_t lhs_bytes = layer.t * R * 2;
  const uint64_t out_bytes = layer.t * C * 4;
  const uint64_t weight_bytes = R * C * 2;
  const uint64_t out_at = align_up(lhs_bytes);
  const uint64_t w_at = align_up(out_at + out_bytes);
  if (w_at + 2 * weight_bytes > spec.vmem_bytes || layer.t > 0xffffffffull) {
    return absl::InvalidArgumentError(str_cat("layer ", layer.name, ": streaming ", layer.t,
                                              " rows needs ", w_at + 2 * weight_bytes,
                                              " bytes of VMEM; the core has ", spec.vmem_bytes));
  }
  LayerProgram out;
  out.program.set_name(layer.name);
  sim::CoreBuilder b(&out.program, core);
  const auto rows = static_cast<uint32_t>(layer.t);
  uint32_t slot = 0;
  for (uint64_t k0 = 0; k0 < layer.k; k0 += R) {
    const auto kw = static_cast<uint32_t>(std::min(R, layer.k - k0));
    for (uint64_t n0 = 0; n0 < layer.n; n0 += C, ++out.folds) {
      const auto nw = static_cast<uint32_t>(std::min(C, layer.n - n0));
      b.load_weights(0, slot, sim::block(w_at + slot * weight_bytes, kw, nw, isa::BF16));
      b.matmul(0, slot, sim::block(0, rows, kw, isa::BF16), sim::block(out_at, rows, nw, isa::F32),
               false);
      slot ^= 1;
    }
  }
  b.halt();
  return out;
}

}  // namespace tpusim::runtime
