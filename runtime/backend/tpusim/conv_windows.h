#pragma once
// Convolutions whose MXUs read their windows in place (ConvFeed::kWindows, im2col.h): no patches.
//
// A convolution's output pixel is the sum over kernel offsets (ky, kx) of the input pixel its
// window holds at that offset times the kernel's C x F slice for the offset. For one offset, the
// input pixels of an output row's windows lie sw pixels apart in the image, and those of
// consecutive output rows sh image rows apart: a strided view of the images, which a grouped
// matmul (isa.proto, Matmul.groups) streams through the MXUs without copying it, a group per
// output row. The products of every offset accumulate in the output. This is how XLA's TPU
// convolution emitter lowers a convolution: a loop over the kernel's window feeding the
// activations to the systolic array where they lie, with no im2col (docs/runtime.md, "Windows
// read in place").
//
// The input gradient is the same walk the other way round: the output gradient's rows, times
// the transposed kernel's slice for an offset, accumulate into the image pixels that offset's
// windows read (col2im done by the MXUs' accumulation instead of the vector unit's adds).
//
// Each output pixel sums its offsets in the order (ky, kx), each offset's channels in chunks of
// the MXU's depth, on one MXU (the MXUs split the output rows between them), so when every
// offset's channels are whole chunks (windows_fill_mxus) the sums are those of the patches'
// product, which takes the same chunks in the same order.

#include <cstdint>
#include <functional>
#include <vector>

#include "configs/slice_spec.h"
#include "runtime/backend/tpusim/im2col.h"
#include "sim/isa/builder.h"

namespace tpusim::runtime::tpusim_backend {

// Whether reading the windows in place costs the MXUs no more passes than the patches would:
// a forward convolution's channels C (an input gradient's, the columns it writes) in whole
// R-deep (C-wide) chunks at every kernel offset, so that kh x kw x ceil(C / R) equals
// ceil(kh x kw x C / R); or a kernel of one offset. Below that (C = 64 on a 128-deep array, or
// the stem's 3 channels), a product per offset would stream the rows through a half-filled
// array once per offset where the patches fold offsets into its depth, so the patches stay.
bool windows_fill_mxus(const config::CoreSpec& core, const Im2col& g, bool input_grad);

// Where one fused tile's product per kernel offset reads and writes: `images` [n, H, W, C] of
// the band geometry `g` (the tile's n images or bands of them), `pixels` [n, OH, OW, F] (the
// forward's output, the input gradient's output gradient), `kernel` [patch, F] for the forward,
// [F, patch] (the transposed kernel) for the input gradient, all f32 and dense.
struct WindowTile {
  const Im2col& g;
  uint32_t n = 0;
  uint64_t images = 0;
  uint64_t pixels = 0;
  uint64_t kernel = 0;
  uint32_t filters = 0;  // F
};

// How the products hook into the tile: `on_load` sees each load_weights, `on_matmul` each
// matmul (both on the MXUs, after the tile's chain made the output ready).
struct WindowHooks {
  std::function<void(sim::InstrRef&)> on_load;
  std::function<void(sim::InstrRef&)> on_matmul;
};

// Forward: pixels (zeroed first by the caller) += for each kernel offset, the images' windows at
// it x the kernel's rows for it. Returns the matmuls emitted.
uint32_t forward_window_products(const config::CoreSpec& core, sim::CoreBuilder& b,
                                 const WindowTile& tile, isa::Precision precision,
                                 std::vector<uint32_t>& next_slot, const WindowHooks& hooks);

// Input gradient: images (zeroed first by the caller) += for each kernel offset, the output
// gradient's rows x the transposed kernel's columns for it, into the pixels its windows read.
uint32_t input_grad_window_products(const config::CoreSpec& core, sim::CoreBuilder& b,
                                    const WindowTile& tile, isa::Precision precision,
                                    std::vector<uint32_t>& next_slot, const WindowHooks& hooks);

}  // namespace tpusim::runtime::tpusim_backend
