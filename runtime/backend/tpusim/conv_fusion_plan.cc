// Which convolutions fuse (Fusion in lowering.h), the reductions of their output they compute,
// and whether one can compute its images' producer group too.
#include <algorithm>

#include "runtime/backend/tpusim/conv_bands.h"
#include "runtime/backend/tpusim/conv_patterns.h"
#include "runtime/backend/tpusim/conv_tiles.h"
#include "runtime/backend/tpusim/conv_windows.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

namespace {

// Whether a convolution fuses: its images' bands (the whole image when it fits) each fit a tile
// slot as `widths` lays them out, cut as `cut` says, and the kernel (or the kernel gradient's
// sums) the once-loaded region.
bool fits(const config::CoreSpec& core, const Im2col& g, Cut cut, const BandWidths& widths,
          int64_t weight_elements) {
  return image_bands(tile_slot_bytes(core), g, cut, widths).ok() &&
         static_cast<uint64_t>(weight_elements) * 4 <= once_loaded_bytes(core);
}

// Whether the patches of forward convolution `id` are read by nothing but it and the fused
// kernel gradient that builds them again (through the reshape autodiff makes of them).
bool patches_read_by_fusions(const Graph& graph, const std::vector<bool>& needed,
                             const Fusions& found, int id, int patches) {
  const bool kernel_grad_fused = std::any_of(found.begin(), found.end(), [&](const auto& f) {
    return f.second.kind == Fusion::Kind::kConvFilterGrad && f.second.patches == patches;
  });
  for (int r = 0; r < graph.size(); ++r) {
    const Node& n = graph.node(r);
    if (r == id || !needed[static_cast<size_t>(r)] ||
        std::find(n.inputs.begin(), n.inputs.end(), patches) == n.inputs.end())
      continue;
    if (!kernel_grad_fused || n.op != Op::kReshape) return false;
  }
  return true;
}

}  // namespace

const char* fusion_kind_name(Fusion::Kind kind) {
  switch (kind) {
    case Fusion::Kind::kConvForward:
      return "conv2d";
    case Fusion::Kind::kConvInputGrad:
      return "conv2d_backprop_input";
    case Fusion::Kind::kConvFilterGrad:
      return "conv2d_backprop_filter";
    case Fusion::Kind::kMaxPool:
      return "max_pool";
    case Fusion::Kind::kMaxPoolGrad:
      break;
  }
  return "max_pool_grad";
}

bool is_convolution(Fusion::Kind kind) {
  return kind != Fusion::Kind::kMaxPool && kind != Fusion::Kind::kMaxPoolGrad;
}

Fusions find_conv_fusions(const Graph& graph, const std::vector<bool>& needed,
                          const config::CoreSpec& core, bool pointwise, bool windows) {
  Fusions found;
  const ConvFeed images = pointwise ? ConvFeed::kImages : ConvFeed::kPatches;
  for (int id = 0; id < graph.size(); ++id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    const Node& n = graph.node(id);
    // Whether a convolution fuses is decided with its patches (or its images, read as they
    // lie); one that fuses so fuses reading its windows too, which needs less of a tile.
    auto fuse = [&](Fusion f, const Im2col& g) {
      const bool input_grad = f.kind == Fusion::Kind::kConvInputGrad;
      f.feed = g.identity ? ConvFeed::kImages
               : windows && f.kind != Fusion::Kind::kConvFilterGrad &&
                       windows_fill_mxus(core, g, input_grad)
                   ? ConvFeed::kWindows
                   : ConvFeed::kPatches;
      found[id] = std::move(f);
    };
    // Per image, the blocks of its tile as each lowering below lays them out.
    if (image_matmul(graph, id) && graph.node(n.inputs[0]).op == Op::kExtractPatches) {
      const Node& e = graph.node(n.inputs[0]);
      const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape, images);
      if (fits(core, g, Cut::kWindowRows, forward_widths(n.shape.dim(3), false),
               graph.node(n.inputs[1]).shape.elements()))
        fuse({Fusion::Kind::kConvForward, {e.inputs[0], n.inputs[1]}, n.inputs[0]}, g);
    } else if (const int patches = filter_grad_patches(graph, id); patches >= 0) {
      const Node& e = graph.node(patches);
      const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape, images);
      // The sums in the once-loaded region, their transpose in the slots (after the tiles).
      if (fits(core, g, Cut::kWindowRows, filter_grad_widths(n.shape.dim(1)), n.shape.elements()) &&
          static_cast<uint64_t>(n.shape.elements()) * 4 <= tiled_bytes(core))
        fuse({Fusion::Kind::kConvFilterGrad, {e.inputs[0], n.inputs[1]}, patches}, g);
    } else if (n.op == Op::kPatchesToImage && image_matmul(graph, n.inputs[0]) &&
               sole_reader(graph, needed, n.inputs[0]) == id) {
      const Node& d = graph.node(n.inputs[0]);
      const Im2col g(n.attrs.window, n.shape, d.shape, images);
      const int64_t filters = graph.node(d.inputs[0]).shape.dim(3);
      if (fits(core, g, Cut::kImageRows, input_grad_widths(filters),
               graph.node(d.inputs[1]).shape.elements()))
        fuse({Fusion::Kind::kConvInputGrad, {d.inputs[0], d.inputs[1]}, n.inputs[0]}, g);
    }
  }
  // A forward convolution whose patches a fragment of their own reads writes them
  // (Fusion::patches_kept), so it builds them.
  for (auto& [id, f] : found) {
    if (f.kind == Fusion::Kind::kConvForward && f.feed == ConvFeed::kWindows &&
        !patches_read_by_fusions(graph, needed, found, id, f.patches))
      f.feed = ConvFeed::kPatches;
  }
  return found;
}

bool conv_fits_image_producer(const Graph& graph, int id, const Fusion& conv,
                              const config::CoreSpec& core, uint32_t blocks, size_t rows) {
  const Node& n = graph.node(id);
  const Node& e = graph.node(conv.patches);
  const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape, conv.feed);
  // The kernel (a kernel gradient's sums), the output reductions' sums and the rows, each
  // aligned in the once-loaded region as the emitter places them.
  const bool forward = conv.kind == Fusion::Kind::kConvForward;
  const int64_t filters = forward ? n.shape.dim(3) : n.shape.dim(1);
  std::vector<uint64_t> once{static_cast<uint64_t>(
      forward ? graph.node(n.inputs[1]).shape.elements() : n.shape.elements())};
  if (!conv.reductions.empty())
    once.push_back(
        static_cast<uint64_t>(static_cast<int64_t>(conv.reductions.size() + 1) * filters));
  once.insert(once.end(), rows, static_cast<uint64_t>(g.C));
  if (Emitter::tile_bytes(once, 1) > once_loaded_bytes(core)) return false;
  const BandWidths widths = forward ? forward_widths(filters, !conv.reductions.empty(), blocks)
                                    : filter_grad_widths(filters, blocks);
  return image_bands(tile_slot_bytes(core), g, Cut::kWindowRows, widths).ok();
}

bool conv_fits_consumer(const Graph& graph, int id, const Fusion& conv,
                        const config::CoreSpec& core, const ConvConsumerBlocks& consumer) {
  const Node& n = graph.node(id);
  const Node& d = graph.node(conv.patches);
  const Im2col g(n.attrs.window, n.shape, d.shape, conv.feed);
  // The kernel, the consumer's rows and the sums' accumulator (a row each, then a value each),
  // each aligned in the once-loaded region as the emitter places them.
  std::vector<uint64_t> once{static_cast<uint64_t>(graph.node(d.inputs[1]).shape.elements())};
  once.insert(once.end(), consumer.rows, static_cast<uint64_t>(consumer.channels));
  if (consumer.sums > 0)
    once.push_back(uint64_t{consumer.sums} * static_cast<uint64_t>(consumer.channels + 1));
  if (Emitter::tile_bytes(once, 1) > once_loaded_bytes(core)) return false;
  const int64_t filters = graph.node(d.inputs[0]).shape.dim(3);
  return image_bands(tile_slot_bytes(core), g, Cut::kImageRows,
                     input_grad_widths(filters, consumer))
      .ok();
}

namespace {

// The forward convolution among `fusions` whose output reduction `r` (over the leading axes)
// reads, directly or through a square nothing else reads and the widening alias of a bf16
// output; -1 when there is none.
int reduced_convolution(const Graph& graph, const std::vector<bool>& needed, const Fusions& fusions,
                        int r) {
  const Node& n = graph.node(r);
  if (n.op != Op::kReduceSum || reduction_fusion(graph, r) != ReductionFusion::kLeadingAxes)
    return -1;
  int x = n.inputs[0];
  if (const int square = summed_square(graph, r); square >= 0) {
    if (sole_reader(graph, needed, square) != r) return -1;
    x = graph.node(square).inputs[0];
  }
  if (graph.node(x).op == Op::kReshape &&
      graph.node(graph.node(x).inputs[0]).shape == graph.node(x).shape)
    x = graph.node(x).inputs[0];
  const auto conv = fusions.find(x);
  const bool forward = conv != fusions.end() && conv->second.kind == Fusion::Kind::kConvForward;
  return forward && graph.node(x).shape.rank() == 4 ? x : -1;
}

}  // namespace

void attach_output_reductions(const Graph& graph, const std::vector<bool>& needed,
                              const config::CoreSpec& core, Fusions* fusions) {
  for (int r = 0; r < graph.size(); ++r) {
    if (!needed[static_cast<size_t>(r)] || fusions->count(r) > 0) continue;
    const int id = reduced_convolution(graph, needed, *fusions, r);
    if (id < 0) continue;
    Fusion& conv = fusions->at(id);
    const Node& n = graph.node(id);
    const Node& e = graph.node(conv.patches);
    const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape, conv.feed);
    const int64_t filters = n.shape.dim(3);
    // The kernel, then one sum per reduction, in the once-loaded region (each block aligned as
    // the emitter places them).
    const uint64_t once = Emitter::tile_bytes(
        {static_cast<uint64_t>(graph.node(n.inputs[1]).shape.elements()),
         static_cast<uint64_t>((static_cast<int64_t>(conv.reductions.size()) + 1) * filters)},
        1);
    if (once > once_loaded_bytes(core) ||
        !image_bands(tile_slot_bytes(core), g, Cut::kWindowRows, forward_widths(filters, true))
             .ok())
      continue;
    conv.reductions.push_back(r);
  }
}

}  // namespace tpusim::runtime::tpusim_backend
