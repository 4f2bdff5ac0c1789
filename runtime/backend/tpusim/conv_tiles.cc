// The blocks of a fused convolution's band tile (conv_tiles.h).
#include "runtime/backend/tpusim/conv_tiles.h"

#include <algorithm>

namespace tpusim::runtime::tpusim_backend {

uint64_t forward_scratch(const Im2col& g, int64_t filters, bool sums) {
  const int64_t sum_blocks = sums ? g.pixels() * filters + filters : 0;
  return static_cast<uint64_t>(patch_scratch_elements(g) + sum_blocks);
}

uint64_t filter_grad_scratch(const Im2col& g, int64_t filters) {
  return static_cast<uint64_t>(patch_scratch_elements(g) + g.pixels() * filters);
}

uint64_t with_producer(uint64_t scratch, const Im2col& g, uint32_t producer_blocks) {
  return std::max(scratch, uint64_t{producer_blocks} * static_cast<uint64_t>(g.image_elements()));
}

uint64_t input_grad_scratch(const Im2col& g, const ConvConsumerBlocks& consumer) {
  const auto patches = static_cast<uint64_t>(g.builds_patches() ? g.patch_elements() : 0);
  if (!consumer.taken) return patches;
  return input_grad_consumer_scratch(g, consumer).part + static_cast<uint64_t>(consumer.channels);
}

ConsumerScratch input_grad_consumer_scratch(const Im2col& g, const ConvConsumerBlocks& consumer) {
  const auto image = static_cast<uint64_t>(g.image_elements());
  ConsumerScratch at;
  at.gradient = static_cast<uint64_t>(g.builds_patches() ? g.patch_elements() : 0);
  at.blocks = at.gradient + image;
  at.value = at.blocks + uint64_t{consumer.blocks} * image;
  at.part = at.value + image;
  return at;
}

BandWidths forward_widths(int64_t filters, bool sums, uint32_t producer_blocks) {
  return [filters, sums, producer_blocks](const Band& b) {
    const Im2col& g = b.g;
    return std::vector<uint64_t>{
        static_cast<uint64_t>(g.image_elements()), static_cast<uint64_t>(g.pixels() * filters),
        with_producer(forward_scratch(g, filters, sums), g, producer_blocks)};
  };
}

BandWidths filter_grad_widths(int64_t filters, uint32_t producer_blocks) {
  return [filters, producer_blocks](const Band& b) {
    const Im2col& g = b.g;
    const int64_t grad = g.pixels() * filters;
    return std::vector<uint64_t>{
        static_cast<uint64_t>(g.image_elements()), static_cast<uint64_t>(grad), 0,
        with_producer(filter_grad_scratch(g, filters), g, producer_blocks)};
  };
}

BandWidths input_grad_widths(int64_t filters, const ConvConsumerBlocks& consumer) {
  return [filters, consumer](const Band& b) {
    const Im2col& g = b.g;
    std::vector<uint64_t> widths{static_cast<uint64_t>(g.pixels() * filters),
                                 static_cast<uint64_t>(g.image_elements()),
                                 input_grad_scratch(g, consumer)};
    // The consumer's loaded values of the image's shape.
    widths.insert(widths.end(), consumer.images, static_cast<uint64_t>(g.image_elements()));
    return widths;
  };
}

}  // namespace tpusim::runtime::tpusim_backend
