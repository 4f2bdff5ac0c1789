#pragma once
// The blocks of a fused convolution's band tile (conv_fusion.cc lays them out; conv_fusion_plan.cc
// checks that they fit), per image of the tile, in f32 elements: the forward's images in,
// output rows, patches (and their stride phases; then, when it sums its output, the output's
// squares and a partial sum); the kernel gradient's images and output gradient in, no output,
// the patches, the gradient transposed (and the phases) in one scratch; the input gradient's
// output gradient in, image gradient out, patch gradients.

#include <cstdint>

#include "runtime/backend/tpusim/conv_bands.h"
#include "runtime/backend/tpusim/im2col.h"

namespace tpusim::runtime::tpusim_backend {

// The forward's scratch: the patches (and phases), and with `sums` the squares and a partial sum.
uint64_t forward_scratch(const Im2col& g, int64_t filters, bool sums);
// The kernel gradient's scratch: the patches (and phases) and the output gradient transposed.
uint64_t filter_grad_scratch(const Im2col& g, int64_t filters);
// The scratch of a band's tile with its images' producer group (ImageProducer) computed first in
// `producer_blocks` blocks of the images: the group is done before the patches are built, so
// the two share the scratch.
uint64_t with_producer(uint64_t scratch, const Im2col& g, uint32_t producer_blocks);
// The input gradient's scratch: the patch gradients, none when they land in the image rows.
uint64_t input_grad_scratch(const Im2col& g);

// Each kind's blocks (image_bands' widths), with `producer_blocks` for an images' producer group.
BandWidths forward_widths(int64_t filters, bool sums, uint32_t producer_blocks = 0);
BandWidths filter_grad_widths(int64_t filters, uint32_t producer_blocks = 0);
BandWidths input_grad_widths(int64_t filters);

}  // namespace tpusim::runtime::tpusim_backend
