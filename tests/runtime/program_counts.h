#pragma once
// What a compiled program holds of one op's fragments, for the compiler's tests: instructions by
// the graph op (or fused kernel) they compute, and by unit.
#include <cstdint>
#include <string>

#include "sim/isa/isa.pb.h"

namespace tpusim::runtime::tpusim_backend {

// The instructions whose origin is of `kind` (the op or fused convolution they compute).
inline int instructions_of(const isa::CoreProgram& core, const std::string& kind) {
  int n = 0;
  for (const isa::Instruction& in : core.instructions()) {
    if (in.origin() > 0 && core.origins(static_cast<int>(in.origin() - 1)).op() == kind) ++n;
  }
  return n;
}

// The DMAs, vector ops and MXU instructions (load_weights and matmul) of `kind`'s fragments.
struct UnitCounts {
  int dma = 0, vector = 0, mxu = 0;
};
inline UnitCounts units_of(const isa::CoreProgram& core, const std::string& kind) {
  UnitCounts n;
  for (const isa::Instruction& in : core.instructions()) {
    if (in.origin() == 0 || core.origins(static_cast<int>(in.origin() - 1)).op() != kind) continue;
    n.dma += in.has_dma();
    n.vector += in.has_vector();
    n.mxu += in.has_load_weights() || in.has_matmul();
  }
  return n;
}

// The bytes the program's DMAs move through HBM (the HBM side of each block copy; packed bf16 at
// 2 bytes an element, as the simulator charges them).
inline uint64_t dma_hbm_bytes(const isa::CoreProgram& core) {
  uint64_t bytes = 0;
  for (const isa::Instruction& in : core.instructions()) {
    if (!in.has_dma()) continue;
    const isa::Dma& d = in.dma();
    const isa::Block& hbm = d.direction() == isa::Dma::HBM_TO_VMEM ? d.src() : d.dst();
    bytes += uint64_t{hbm.rows()} * hbm.cols() * (d.packed_bf16() ? 2 : 4);
  }
  return bytes;
}

}  // namespace tpusim::runtime::tpusim_backend
