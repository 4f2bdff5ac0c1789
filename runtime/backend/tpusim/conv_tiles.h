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
// What a consumer taken in by an input gradient adds to its band tile (fusion_plan.h): the
// values of the image's shape it loads, its values per channel (loaded once), its scratch
// blocks of the image's shape, and the sums of the reductions that take it in.
struct ConvConsumerBlocks {
  uint32_t images = 0;
  uint32_t rows = 0;
  uint32_t blocks = 0;
  uint32_t sums = 0;
  int64_t channels = 0;
  bool taken = false;  // no consumer: none of the above
};
// The input gradient's scratch: the patch gradients, none when they land in the image rows; with
// a consumer, then the image gradient, the consumer's blocks, its last value and a partial sum's
// row, each after the one before (input_grad_consumer_scratch: where each starts).
uint64_t input_grad_scratch(const Im2col& g, const ConvConsumerBlocks& consumer = {});
struct ConsumerScratch {
  uint64_t gradient = 0, blocks = 0, value = 0, part = 0;  // f32 elements into an image's scratch
};
ConsumerScratch input_grad_consumer_scratch(const Im2col& g, const ConvConsumerBlocks& consumer);

// Each kind's blocks (image_bands' widths), with `producer_blocks` for an images' producer group.
BandWidths forward_widths(int64_t filters, bool sums, uint32_t producer_blocks = 0);
BandWidths filter_grad_widths(int64_t filters, uint32_t producer_blocks = 0);
BandWidths input_grad_widths(int64_t filters, const ConvConsumerBlocks& consumer = {});

}  // namespace tpusim::runtime::tpusim_backend
