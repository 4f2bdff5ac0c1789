// The producer group a fused convolution computes on its image bands (lowering.h,
// ImageProducer; fusion_plan.h, "groups recomputed by their readers").
#include <algorithm>

#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_lowering.h"

namespace tpusim::runtime::tpusim_backend {

using sim::block;

ImageProducer image_producer(Lowering& l, int images) {
  ImageProducer p;
  if (l.fusion == nullptr || !l.fusion->node(images).recomputed) return p;
  p.members = l.fusion->members(images);
  const ProducerOperands operands = producer_operands(l.graph, *l.fusion, p.members);
  p.image = operands.images.front();  // the fusion plan lets a convolution take one
  p.row_nodes = operands.rows;
  const Shape& shape = l.node(images).shape;
  const auto channels = static_cast<uint32_t>(shape.dim(shape.rank() - 1));
  for (int row : operands.rows) {
    TileOperand tile = classify_operand(l, row, shape).tile;
    tile.cols = channels;
    p.rows.push_back(tile);
  }
  p.blocks = producer_scratch_blocks(l.graph, *l.fusion, p.members);
  return p;
}

void compute_image_producer(Lowering& l, const ImageProducer& p, uint64_t images, uint32_t pixels,
                            const std::vector<isa::Block>& rows, uint64_t scratch,
                            sim::VectorChain& chain) {
  const Shape& shape = l.node(p.members.back()).shape;
  const auto channels = static_cast<uint32_t>(shape.dim(shape.rank() - 1));
  const GroupOperands ops = group_operands(l, p.members, shape);
  const GroupScratch plan = plan_scratch(l, p.members, ops, {}, true);
  const isa::Block image = block(images, pixels, channels, isa::F32);
  // The group's operands by slot: the image, and each row where it was loaded.
  std::vector<isa::Block> in(ops.tiles.size());
  for (const auto& [node, slot] : ops.slot) {
    if (node == p.image) {
      in[slot] = image;
      continue;
    }
    const auto at = std::find(p.row_nodes.begin(), p.row_nodes.end(), node);
    in[slot] = rows[static_cast<size_t>(at - p.row_nodes.begin())];
  }
  const uint64_t block_bytes = uint64_t{pixels} * channels * 4;
  const GroupBlocks blocks{
      [&](size_t slot) { return in[slot]; },
      [&](size_t j) { return block(scratch + j * block_bytes, pixels, channels, isa::F32); },
      [&] { return image; },
      {}};  // no rng_uniform member: a stateful RNG's group is never recomputed by its readers
  compute_group(l, p.members, ops, plan, blocks, image, chain);
}

}  // namespace tpusim::runtime::tpusim_backend
