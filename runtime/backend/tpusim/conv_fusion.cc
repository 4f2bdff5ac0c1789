// Fused convolutions (Fusion in lowering.h): which convolutions fuse, and their fragments.
#include <algorithm>

#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// The node reading `id`, when exactly one needed node does and `id` is no output or update value;
// else -1.
int sole_reader(const Graph& graph, const std::vector<bool>& needed, int id) {
  for (const auto& o : graph.outputs())
    if (o.node == id) return -1;
  for (const auto& u : graph.updates())
    if (u.value == id) return -1;
  int reader = -1;
  for (int r = 0; r < graph.size(); ++r) {
    if (!needed[static_cast<size_t>(r)]) continue;
    for (int in : lowering_uses(graph, r).needs()) {
      if (in != id) continue;
      if (reader >= 0 && reader != r) return -1;
      reader = r;
    }
  }
  return reader;
}

// Whether a tile of one image fits a tile slot as the emitter lays it out (`widths`: its
// blocks' elements per image: operands, output, scratch), and the kernel (or the kernel
// gradient's sums) the once-loaded region.
bool fits(const config::CoreSpec& core, const std::vector<int64_t>& widths,
          int64_t weight_elements) {
  const std::vector<uint64_t> w(widths.begin(), widths.end());
  return Emitter::tile_bytes(w, 1) <= tile_slot_bytes(core) &&
         static_cast<uint64_t>(weight_elements) * 4 <= once_loaded_bytes(core);
}

// A matmul of a rank-4 lhs by a shared rank-2 rhs, as conv2d and its input gradient make.
bool image_matmul(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  return n.op == Op::kMatMul && graph.node(n.inputs[0]).shape.rank() == 4 &&
         graph.node(n.inputs[1]).shape.rank() == 2;
}

// For a kernel gradient matmul(transpose(reshape(extract_patches(x))), g2) with g2 [pixels,
// filters], as autodiff makes it, the extract_patches node; else -1.
int filter_grad_patches(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kMatMul || n.shape.rank() != 2) return -1;
  const Node& lhs = graph.node(n.inputs[0]);
  if (lhs.op != Op::kTranspose || lhs.attrs.axes != std::vector<int64_t>{1, 0}) return -1;
  int source = lhs.inputs[0];
  while (graph.node(source).op == Op::kReshape) source = graph.node(source).inputs[0];
  const Node& e = graph.node(source);
  if (e.op != Op::kExtractPatches || e.shape.rank() != 4) return -1;
  const Shape& g = graph.node(n.inputs[1]).shape;
  const bool rows_match = g.dim(0) == e.shape.elements() / e.shape.dim(3);
  return rows_match && n.shape.dim(0) == e.shape.dim(3) ? source : -1;
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
                          const config::CoreSpec& core) {
  Fusions found;
  for (int id = 0; id < graph.size(); ++id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    const Node& n = graph.node(id);
    // Per image, the blocks of its tile as each lowering below lays them out.
    if (image_matmul(graph, id) && graph.node(n.inputs[0]).op == Op::kExtractPatches) {
      const Node& e = graph.node(n.inputs[0]);
      const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape);
      // The images in, the output rows, the patches.
      if (fits(core, {g.image_elements(), g.pixels() * n.shape.dim(3), g.patch_elements()},
               graph.node(n.inputs[1]).shape.elements()))
        found[id] = {Fusion::Kind::kConvForward, {e.inputs[0], n.inputs[1]}, n.inputs[0]};
    } else if (const int patches = filter_grad_patches(graph, id); patches >= 0) {
      const Node& e = graph.node(patches);
      const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape);
      const int64_t grad = g.pixels() * n.shape.dim(1);
      // The images and the output gradient in, no output, the patches and the gradient
      // transposed in one scratch.
      if (fits(core, {g.image_elements(), grad, 0, g.patch_elements() + grad},
               2 * n.shape.elements()))
        found[id] = {Fusion::Kind::kConvFilterGrad, {e.inputs[0], n.inputs[1]}, patches};
    } else if (n.op == Op::kPatchesToImage && image_matmul(graph, n.inputs[0]) &&
               sole_reader(graph, needed, n.inputs[0]) == id) {
      const Node& d = graph.node(n.inputs[0]);
      const Im2col g(n.attrs.window, n.shape, d.shape);
      const int64_t filters = graph.node(d.inputs[0]).shape.dim(3);
      // The output gradient in, the image gradient out, the patch gradients.
      if (fits(core, {g.pixels() * filters, g.image_elements(), g.patch_elements()},
               graph.node(d.inputs[1]).shape.elements()))
        found[id] = {Fusion::Kind::kConvInputGrad, {d.inputs[0], d.inputs[1]}, n.inputs[0]};
    }
  }
  return found;
}

namespace {

// Forward: per tile of images, im2col into scratch (as lower_extract_patches does into its
// output), optionally a copy of the patches to their buffer, then patches x w on the MXUs into
// the tile's output rows ([images x OH x OW, filters] is the output's [images, OH*OW*filters]).
absl::Status lower_conv_forward(Lowering& l, int id, const Fusion& conv) {
  const Node& n = l.node(id);
  const Node& e = l.node(conv.patches);
  const Shape& in = l.node(e.inputs[0]).shape;
  const Im2col g(e.attrs.window, in, e.shape);
  const int64_t filters = n.shape.dim(3);
  const auto image_cols = static_cast<uint32_t>(g.image_elements());
  const auto patch_cols = static_cast<uint32_t>(g.patch_elements());
  const auto out_cols = static_cast<uint32_t>(g.pixels() * filters);
  const int weights = n.inputs[1];
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  l.emit.rowwise(
      l.address(id), static_cast<uint64_t>(in.dim(0)), out_cols, isa::F32,
      {TileOperand{TileOperand::Kind::kFull, l.address(e.inputs[0]), isa::F32, image_cols},
       TileOperand{TileOperand::Kind::kRow, l.address(weights), isa::F32,
                   static_cast<uint32_t>(g.patch * filters)}},
      1, patch_cols, [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        const isa::Block scratch = t.scratch(0);
        const uint64_t patches = scratch.address();
        build_patches(t, g, t.in(0).address(), patches);
        const uint64_t built = t.chain_count();
        if (conv.patches_kept) {
          t.store(scratch,
                  block(l.address(conv.patches) + t.first_row() * patch_cols * 4, t.rows(),
                        patch_cols, isa::F32),
                  built);
        }
        const auto pixels = static_cast<uint32_t>(t.rows() * g.pixels());
        emit_mxu_product(
            l.emit.core(), b, block(patches, pixels, static_cast<uint32_t>(g.patch), isa::F32),
            block(t.in(1).address(), static_cast<uint32_t>(g.patch), static_cast<uint32_t>(filters),
                  isa::F32),
            block(t.out().address(), pixels, static_cast<uint32_t>(filters), isa::F32), false,
            l.precision, next_slot, [&](sim::InstrRef& load) { t.after_loads(load); },
            [&](sim::InstrRef& mm, bool) { t.fan_out(mm, built); });
        // A bf16 output: rounded once the MXUs are done with it (the store waits for the chain).
        if (n.dtype == DType::kBF16) t.chain(t.join(b.unary(Vector::ROUND_BF16, t.out(), t.out())));
      });
  return absl::OkStatus();
}

// Input gradient: per tile of images, g x w_t on the MXUs into scratch (the tile's patch
// gradients), then col2im into the tile's images as lower_patches_to_image does.
absl::Status lower_conv_input_grad(Lowering& l, int id, const Fusion& conv) {
  const Node& n = l.node(id);
  const Node& d = l.node(conv.patches);
  const Im2col g(n.attrs.window, n.shape, d.shape);
  const Shape& grad = l.node(d.inputs[0]).shape;
  const int64_t filters = grad.dim(3);
  const auto image_cols = static_cast<uint32_t>(g.image_elements());
  const auto patch_cols = static_cast<uint32_t>(g.patch_elements());
  const auto grad_cols = static_cast<uint32_t>(g.pixels() * filters);
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  l.emit.rowwise(
      l.address(id), static_cast<uint64_t>(n.shape.dim(0)), image_cols, isa::F32,
      {TileOperand{TileOperand::Kind::kFull, l.address(d.inputs[0]), isa::F32, grad_cols},
       TileOperand{TileOperand::Kind::kRow, l.address(d.inputs[1]), isa::F32,
                   static_cast<uint32_t>(filters * g.patch)}},
      1, patch_cols, [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        const uint64_t patches = t.scratch(0).address();
        const auto pixels = static_cast<uint32_t>(t.rows() * g.pixels());
        emit_mxu_product(
            l.emit.core(), b,
            block(t.in(0).address(), pixels, static_cast<uint32_t>(filters), isa::F32),
            block(t.in(1).address(), static_cast<uint32_t>(filters), static_cast<uint32_t>(g.patch),
                  isa::F32),
            block(patches, pixels, static_cast<uint32_t>(g.patch), isa::F32), false, l.precision,
            next_slot, [&](sim::InstrRef& load) { t.after_loads(load); },
            // The products need only the tile's loads, which each MXU's load_weights waits for
            // (an MXU runs its instructions in order): the MXUs may work on this tile while the
            // vector unit still sums the last one into its images.
            [&](sim::InstrRef& mm, bool) { t.fan_out(mm, 0); });
        // col2im reads what the MXUs wrote: its first op waits for them all.
        t.chain(t.join(b.fill(t.out(), 0)));
        if (g.flat) zero_wrapped(t, g, patches);
        for_each_window_run(g, t.out().address(), patches, t.rows(),
                            [&](const isa::Block& pixels_block, const isa::Block& windows) {
                              t.chain(b.binary(Vector::ADD, pixels_block, pixels_block, windows));
                            });
        if (n.dtype == DType::kBF16) t.chain(b.unary(Vector::ROUND_BF16, t.out(), t.out()));
      });
  return absl::OkStatus();
}

// Kernel gradient: per tile of images, im2col into scratch (as the forward does) and the tile's
// output gradient transposed to [filters, pixels] beside it; g^T x patches on the MXUs (the
// patches as weights, 128 pixels deep at a time) accumulates [filters, patch] over all the tiles
// in the once-loaded region. After the last tile the sum is transposed to [patch, filters] and
// written.
absl::Status lower_conv_filter_grad(Lowering& l, int id, const Fusion& conv) {
  const Node& n = l.node(id);
  const Node& e = l.node(conv.patches);
  const Shape& in = l.node(e.inputs[0]).shape;
  const Im2col g(e.attrs.window, in, e.shape);
  const auto filters = static_cast<uint32_t>(n.shape.dim(1));
  const auto patch = static_cast<uint32_t>(g.patch);
  const auto image_cols = static_cast<uint32_t>(g.image_elements());
  const auto patch_cols = static_cast<uint32_t>(g.patch_elements());
  const auto grad_cols = static_cast<uint32_t>(g.pixels() * filters);
  sim::CoreBuilder& b = l.emit.builder();
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  const isa::Block sums = l.emit.reduce_rows(
      static_cast<uint64_t>(in.dim(0)),
      {TileOperand{TileOperand::Kind::kFull, l.address(e.inputs[0]), isa::F32, image_cols},
       TileOperand{TileOperand::Kind::kFull, l.address(n.inputs[1]), isa::F32, grad_cols}},
      1, patch_cols + grad_cols, 2 * patch * filters, [&](Tile& t) {
        const uint64_t patches = t.scratch(0).address();
        const uint64_t grad_t = patches + uint64_t{t.rows()} * patch_cols * 4;
        const auto pixels = static_cast<uint32_t>(t.rows() * g.pixels());
        build_patches(t, g, t.in(0).address(), patches);
        t.chain(b.transpose(block(grad_t, filters, pixels, isa::F32),
                            block(t.in(1).address(), pixels, filters, isa::F32)));
        const uint64_t built = t.chain_count();
        emit_mxu_product(
            l.emit.core(), b, block(grad_t, filters, pixels, isa::F32),
            block(patches, pixels, patch, isa::F32),
            block(t.accumulator().address(), filters, patch, isa::F32), t.first_row() > 0,
            l.precision, next_slot, [&](sim::InstrRef& load) { t.fan_out(load, built); },
            [&](sim::InstrRef& mm, bool) { t.fan_out(mm, built); });
      });
  Tile last = l.emit.epilogue();
  const isa::Block result =
      block(sums.address() + uint64_t{patch} * filters * 4, patch, filters, isa::F32);
  last.chain(last.join(b.transpose(result, block(sums.address(), filters, patch, isa::F32))));
  if (n.dtype == DType::kBF16) last.chain(b.unary(Vector::ROUND_BF16, result, result));
  last.store(result, block(l.address(id), patch, filters, isa::F32), last.chain_count());
  return absl::OkStatus();
}

}  // namespace

absl::Status lower_conv(Lowering& l, int id, const Fusion& conv) {
  // Each kind rounds a bf16 result in VMEM before storing it (fusion_rounds_output).
  switch (conv.kind) {
    case Fusion::Kind::kConvForward:
      return lower_conv_forward(l, id, conv);
    case Fusion::Kind::kConvInputGrad:
      return lower_conv_input_grad(l, id, conv);
    case Fusion::Kind::kConvFilterGrad:
      return lower_conv_filter_grad(l, id, conv);
    default:
      break;
  }
  return absl::InternalError("tpusim backend: lower_conv of a fusion that is no convolution");
}

}  // namespace tpusim::runtime::tpusim_backend
