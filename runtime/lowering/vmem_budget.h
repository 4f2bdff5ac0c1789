#pragma once
// How the tpusim compiler divides a core's VMEM: one policy for every fragment. Fragments run one
// after another, each with all of VMEM to itself:
// - a row-tiled fragment (the Emitter's, emitter.h) takes two tile slots of 3/8 each, one loading
//   while the other computes (and stores), and keeps the last quarter for the operands it loads
//   once per fragment and its accumulators;
// - a GEMM fragment (gemm.h) takes the same three quarters, the two slots' place, for its
//   double-buffered slices and accumulators.
// The quarter above the slots holds a fused convolution's kernel (or its gradient's sums), so a
// fragment's once-loaded region is as large as a slot's third.

#include <cstdint>

#include "configs/slice_spec.h"

namespace tpusim::runtime {

// Each of a row-tiled fragment's two tile slots.
inline uint64_t tile_slot_bytes(const config::CoreSpec& core) { return core.vmem_bytes / 8 * 3; }
// Both slots: what a row-tiled fragment's tiles, or a GEMM's buffers, may take.
inline uint64_t tiled_bytes(const config::CoreSpec& core) { return 2 * tile_slot_bytes(core); }
// Above the slots: operands loaded once per fragment and accumulators.
inline uint64_t once_loaded_bytes(const config::CoreSpec& core) {
  return core.vmem_bytes - tiled_bytes(core);
}

}  // namespace tpusim::runtime
