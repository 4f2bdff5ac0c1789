// Lowering of image patches (im2col and its adjoint) and of the convolutions built on them.
#include <algorithm>
#include <functional>

#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// The output columns [ox0, ox1) of a window row at kernel column kx whose input column
// ox * sw + kx - pad_left lies inside an image in_w wide, and x0, the first of those input
// columns; false when there is none.
bool window_columns(const Window& w, int64_t kx, int64_t out_w, int64_t in_w, int64_t* ox0,
                    int64_t* ox1, int64_t* x0) {
  *ox0 = 0;
  while (*ox0 < out_w && *ox0 * w.sw + kx - w.pad_left < 0) ++*ox0;
  *ox1 = out_w;
  while (*ox1 > *ox0 && (*ox1 - 1) * w.sw + kx - w.pad_left >= in_w) --*ox1;
  *x0 = *ox0 * w.sw + kx - w.pad_left;
  return *ox1 > *ox0;
}

// The output rows [oy0, oy1) whose window row ky lies inside the image.
void window_rows(const Window& w, int64_t ky, int64_t out_h, int64_t in_h, int64_t* oy0,
                 int64_t* oy1) {
  *oy0 = 0;
  *oy1 = out_h;
  while (*oy0 < out_h && *oy0 * w.sh + ky - w.pad_top < 0) ++*oy0;
  while (*oy1 > *oy0 && (*oy1 - 1) * w.sh + ky - w.pad_top >= in_h) --*oy1;
}

// A convolution's im2col geometry: NHWC images of H x W x C, OH x OW windows of `patch` values.
// In the flat view (stride 1, output as big as the input) consecutive windows (image, oy, ox)
// read consecutive pixels, so one kernel offset is one strided block over a whole tile.
struct Im2col {
  Window w;
  int64_t H, W, C, OH, OW, patch;
  bool flat;
  Im2col(const Window& window, const Shape& image, const Shape& patches)
      : w(window),
        H(image.dim(1)),
        W(image.dim(2)),
        C(image.dim(3)),
        OH(patches.dim(1)),
        OW(patches.dim(2)),
        patch(window.kh * window.kw * image.dim(3)),
        flat(window.sw == 1 && window.sh == 1 && OW == W && OH == H) {}
};

isa::Block f32_block(uint64_t at, int64_t rows, int64_t cols, int64_t stride) {
  return block(at, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), isa::F32,
               static_cast<uint64_t>(stride) * 4);
}

// In the flat view a copy or add for one kernel offset runs over every window of the tile's
// images at once, so windows that fall outside their image wrap into neighbouring rows or
// images. These fills zero those positions of the patches: per image and kernel row the rows
// outside its valid range, and per tile the wrapped columns.
void zero_wrapped(Tile& t, const Im2col& g, uint64_t patches) {
  sim::CoreBuilder& b = t.e_builder();
  const Window& w = g.w;
  for (int64_t ky = 0; ky < w.kh; ++ky) {
    int64_t oy0 = 0, oy1 = 0;
    window_rows(w, ky, g.OH, g.H, &oy0, &oy1);
    for (int64_t r = 0; r < static_cast<int64_t>(t.rows()); ++r) {
      for (auto [from, to] : {std::pair{int64_t{0}, oy0}, std::pair{oy1, g.OH}}) {
        if (to <= from) continue;
        const uint64_t at =
            patches +
            static_cast<uint64_t>(((r * g.OH + from) * g.OW) * g.patch + ky * w.kw * g.C) * 4;
        t.chain(b.fill(f32_block(at, (to - from) * g.OW, w.kw * g.C, g.patch), 0));
      }
    }
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      int64_t ox0 = 0, ox1 = 0, x0 = 0;
      window_columns(w, kx, g.OW, g.W, &ox0, &ox1, &x0);
      for (int64_t ox = 0; ox < g.OW; ++ox) {
        if (ox >= ox0 && ox < ox1) continue;
        const uint64_t at =
            patches + static_cast<uint64_t>(ox * g.patch + (ky * w.kw + kx) * g.C) * 4;
        t.chain(b.fill(f32_block(at, t.rows() * g.OH, g.C, g.OW * g.patch), 0));
      }
    }
  }
}

// Calls fn(pixels, windows) for each run of windows one instruction covers: `pixels` is the
// run's block of the tile's images (C-wide rows), `windows` its block of the tile's patches (the
// columns of one kernel offset). In the flat view one run per kernel offset over the whole tile
// of `count` images (from the first valid window to the last image's last), otherwise one per
// offset, image and output row.
void for_each_window_run(const Im2col& g, uint64_t images, uint64_t patches, int64_t count,
                         const std::function<void(const isa::Block&, const isa::Block&)>& fn) {
  const Window& w = g.w;
  auto run = [&](int64_t ky, int64_t kx, int64_t r, int64_t oy, int64_t ox, int64_t rows) {
    const int64_t y = oy * w.sh + ky - w.pad_top, x = ox * w.sw + kx - w.pad_left;
    fn(f32_block(images + static_cast<uint64_t>(((r * g.H + y) * g.W + x) * g.C) * 4, rows, g.C,
                 w.sw * g.C),
       f32_block(patches + static_cast<uint64_t>(((r * g.OH + oy) * g.OW + ox) * g.patch +
                                                 (ky * w.kw + kx) * g.C) *
                               4,
                 rows, g.C, g.patch));
  };
  for (int64_t ky = 0; ky < w.kh; ++ky) {
    int64_t oy0 = 0, oy1 = 0;
    window_rows(w, ky, g.OH, g.H, &oy0, &oy1);
    if (oy1 <= oy0) continue;
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      int64_t ox0 = 0, ox1 = 0, x0 = 0;
      if (!window_columns(w, kx, g.OW, g.W, &ox0, &ox1, &x0)) continue;
      if (g.flat) {
        run(ky, kx, 0, oy0, ox0, ((count - 1) * g.OH + oy1 - 1 - oy0) * g.OW + ox1 - ox0);
        continue;
      }
      for (int64_t r = 0; r < count; ++r) {
        for (int64_t oy = oy0; oy < oy1; ++oy) run(ky, kx, r, oy, ox0, ox1 - ox0);
      }
    }
  }
}

// The patches of the tile's images (at `images`) at `patches`: as lower_extract_patches builds
// them into its output.
void build_patches(Tile& t, const Im2col& g, uint64_t images, uint64_t patches) {
  sim::CoreBuilder& b = t.e_builder();
  if (!g.flat) {
    t.chain(b.fill(block(patches, t.rows(), static_cast<uint32_t>(g.OH * g.OW * g.patch),
                         isa::F32),
                   0));
  }
  for_each_window_run(g, images, patches, t.rows(),
                      [&](const isa::Block& pixels, const isa::Block& windows) {
                        t.chain(b.unary(Vector::COPY, windows, pixels));
                      });
  if (g.flat) zero_wrapped(t, g, patches);
}

}  // namespace

// im2col in VMEM, a tile of whole images at a time: one DMA brings the images in, the patch rows
// are assembled by vector copies, one DMA takes them out. At stride 1 with the output as big as
// the input (SAME convolutions) consecutive windows (image, oy, ox) read consecutive pixels, so
// each kernel offset (ky, kx) is one strided copy for the whole tile (the flat view), and the
// windows that wrap round a row or image edge (the padding) are zeroed afterwards. Otherwise
// the patches start zeroed and each offset is one copy per image and output row.
absl::Status lower_extract_patches(Lowering& l, int id) {
  const Node& n = l.node(id);
  const Shape& in = l.node(n.inputs[0]).shape;
  const Im2col g(n.attrs.window, in, n.shape);
  const auto image_cols = static_cast<uint32_t>(g.H * g.W * g.C);
  const auto out_cols = static_cast<uint32_t>(g.OH * g.OW * g.patch);
  l.emit.rowwise(
      l.address(id), static_cast<uint64_t>(in.dim(0)), out_cols, isa::F32,
      {TileOperand{TileOperand::Kind::kFull, l.address(n.inputs[0]), isa::F32, image_cols}}, 0, 0,
      [&](Tile& t) {
        build_patches(t, g, t.in(0).address(), t.out().address());
      });
  return absl::OkStatus();
}

// Sums patches back into the image (the adjoint of im2col), a tile of whole images at a time in
// VMEM. For one kernel offset (ky, kx) distinct windows touch distinct pixels, so in the flat
// view (see lower_extract_patches) each offset is one vector add over the whole tile, and
// otherwise one per image and output row; offsets go in (ky, kx) order, so every pixel sums its
// contributions in a fixed order. In the flat view the wrapped windows of the patches are zeroed
// first, so that adding them changes nothing.
absl::Status lower_patches_to_image(Lowering& l, int id) {
  const Node& n = l.node(id);
  const Im2col g(n.attrs.window, n.shape, l.node(n.inputs[0]).shape);
  const uint64_t image_bytes = static_cast<uint64_t>(g.H * g.W * g.C) * 4,
                 patch_bytes = static_cast<uint64_t>(g.OH * g.OW * g.patch) * 4;
  if (image_bytes + patch_bytes > l.emit.tile_budget_bytes()) {
    return absl::UnimplementedError(
        str_cat("tpusim backend: patches_to_image of a ", g.H, "x", g.W, "x", g.C, " image with ",
                g.OH, "x", g.OW, " windows needs ", image_bytes + patch_bytes,
                " bytes of VMEM per image; the tile budget is ", l.emit.tile_budget_bytes()));
  }
  l.emit.rowwise(l.address(id), static_cast<uint64_t>(n.shape.dim(0)),
                 static_cast<uint32_t>(image_bytes / 4), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, l.address(n.inputs[0]), isa::F32,
                              static_cast<uint32_t>(patch_bytes / 4)}},
                 0, 0, [&](Tile& t) {
                   sim::CoreBuilder& b = t.e_builder();
                   const uint64_t patches = t.in(0).address();
                   t.chain(b.fill(t.out(), 0));
                   if (g.flat) zero_wrapped(t, g, patches);
                   for_each_window_run(g, t.out().address(), patches, t.rows(),
                                       [&](const isa::Block& pixels, const isa::Block& windows) {
                                         t.chain(b.binary(Vector::ADD, pixels, pixels, windows));
                                       });
                 });
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend

// ---- Fused convolutions (ConvFusion) ----

namespace tpusim::runtime::tpusim_backend {

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
    for (int in : operands_read(graph, r)) {
      if (in != id) continue;
      if (reader >= 0 && reader != r) return -1;
      reader = r;
    }
  }
  return reader;
}

// Whether a tile of one image (its pixel, patch and gradient or result rows, 4 bytes an element)
// and the weights fit the emitter's VMEM: rowwise keeps 64 bytes a row spare.
bool fits(const config::CoreSpec& core, int64_t per_image_elements, int64_t weight_elements) {
  return static_cast<uint64_t>(per_image_elements) * 4 + 64 <= Emitter::slot_bytes(core) &&
         static_cast<uint64_t>(weight_elements) * 4 <= Emitter::once_bytes(core);
}

// A matmul of a rank-4 lhs by a shared rank-2 rhs, as conv2d and its input gradient make.
bool image_matmul(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  return n.op == Op::kMatMul && transposed_lhs_source(graph, id) < 0 &&
         graph.node(n.inputs[0]).shape.rank() == 4 && graph.node(n.inputs[1]).shape.rank() == 2;
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

const char* conv_kind_name(ConvFusion::Kind kind) {
  switch (kind) {
    case ConvFusion::Kind::kForward:
      return "conv2d";
    case ConvFusion::Kind::kInputGrad:
      return "conv2d_backprop_input";
    case ConvFusion::Kind::kFilterGrad:
      break;
  }
  return "conv2d_backprop_filter";
}

ConvFusions find_conv_fusions(const Graph& graph, const std::vector<bool>& needed,
                              const config::CoreSpec& core) {
  ConvFusions found;
  for (int id = 0; id < graph.size(); ++id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    const Node& n = graph.node(id);
    if (image_matmul(graph, id) && graph.node(n.inputs[0]).op == Op::kExtractPatches) {
      const int patches = n.inputs[0];
      const Node& e = graph.node(patches);
      const Shape& image = graph.node(e.inputs[0]).shape;
      const int64_t per_image = image.elements() / image.dim(0) +
                                e.shape.elements() / e.shape.dim(0) +
                                n.shape.elements() / n.shape.dim(0);
      if (!fits(core, per_image, graph.node(n.inputs[1]).shape.elements())) continue;
      found[id] = {ConvFusion::Kind::kForward, patches, false};
    } else if (const int patches = filter_grad_patches(graph, id); patches >= 0) {
      const Node& e = graph.node(patches);
      const Shape& image = graph.node(e.inputs[0]).shape;
      const int64_t filters = n.shape.dim(1);
      const int64_t per_image = image.elements() / image.dim(0) +
                                e.shape.elements() / e.shape.dim(0) +
                                2 * e.shape.dim(1) * e.shape.dim(2) * filters;
      if (!fits(core, per_image, 2 * n.shape.elements())) continue;
      found[id] = {ConvFusion::Kind::kFilterGrad, patches, false};
    } else if (n.op == Op::kPatchesToImage && image_matmul(graph, n.inputs[0]) &&
               sole_reader(graph, needed, n.inputs[0]) == id) {
      const Node& d = graph.node(n.inputs[0]);
      const Shape& g = graph.node(d.inputs[0]).shape;
      const int64_t per_image = g.elements() / g.dim(0) + d.shape.elements() / d.shape.dim(0) +
                                n.shape.elements() / n.shape.dim(0);
      if (!fits(core, per_image, graph.node(d.inputs[1]).shape.elements())) continue;
      found[id] = {ConvFusion::Kind::kInputGrad, n.inputs[0], false};
    }
  }
  return found;
}

std::vector<int> fragment_reads(const Graph& graph, const ConvFusions& convs, int id) {
  const auto it = convs.find(id);
  if (it == convs.end()) return operands_read(graph, id);
  const Node& patches = graph.node(it->second.patches);
  // Forward: the images and the kernel; input gradient: the output gradient and the kernel
  // transposed; kernel gradient: the images and the output gradient.
  return {patches.inputs[0], it->second.kind == ConvFusion::Kind::kInputGrad
                                 ? patches.inputs[1]
                                 : graph.node(id).inputs[1]};
}

namespace {

// Forward: per tile of images, im2col into scratch (as lower_extract_patches does into its
// output), optionally a copy of the patches to their buffer, then patches x w on the MXUs into
// the tile's output rows ([images x OH x OW, filters] is the output's [images, OH*OW*filters]).
absl::Status lower_conv_forward(Lowering& l, int id, const ConvFusion& conv) {
  const Node& n = l.node(id);
  const Node& e = l.node(conv.patches);
  const Shape& in = l.node(e.inputs[0]).shape;
  const Im2col g(e.attrs.window, in, e.shape);
  const int64_t filters = n.shape.dim(3);
  const auto image_cols = static_cast<uint32_t>(g.H * g.W * g.C);
  const auto patch_cols = static_cast<uint32_t>(g.OH * g.OW * g.patch);
  const auto out_cols = static_cast<uint32_t>(g.OH * g.OW * filters);
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
        const auto pixels = static_cast<uint32_t>(t.rows() * g.OH * g.OW);
        emit_mxu_product(
            l.emit.core(), b, block(patches, pixels, static_cast<uint32_t>(g.patch), isa::F32),
            block(t.in(1).address(), static_cast<uint32_t>(g.patch),
                  static_cast<uint32_t>(filters), isa::F32),
            block(t.out().address(), pixels, static_cast<uint32_t>(filters), isa::F32), false,
            l.precision, next_slot, [&](sim::InstrRef& load) { t.after_loads(load); },
            [&](sim::InstrRef& mm, bool) { t.fan_out(mm, built); });
      });
  return absl::OkStatus();
}

// Input gradient: per tile of images, g x w_t on the MXUs into scratch (the tile's patch
// gradients), then col2im into the tile's images as lower_patches_to_image does.
absl::Status lower_conv_input_grad(Lowering& l, int id, const ConvFusion& conv) {
  const Node& n = l.node(id);
  const Node& d = l.node(conv.patches);
  const Im2col g(n.attrs.window, n.shape, d.shape);
  const Shape& grad = l.node(d.inputs[0]).shape;
  const int64_t filters = grad.dim(3);
  const auto image_cols = static_cast<uint32_t>(g.H * g.W * g.C);
  const auto patch_cols = static_cast<uint32_t>(g.OH * g.OW * g.patch);
  const auto grad_cols = static_cast<uint32_t>(g.OH * g.OW * filters);
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  l.emit.rowwise(
      l.address(id), static_cast<uint64_t>(n.shape.dim(0)), image_cols, isa::F32,
      {TileOperand{TileOperand::Kind::kFull, l.address(d.inputs[0]), isa::F32, grad_cols},
       TileOperand{TileOperand::Kind::kRow, l.address(d.inputs[1]), isa::F32,
                   static_cast<uint32_t>(filters * g.patch)}},
      1, patch_cols, [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        const uint64_t patches = t.scratch(0).address();
        const auto pixels = static_cast<uint32_t>(t.rows() * g.OH * g.OW);
        emit_mxu_product(
            l.emit.core(), b, block(t.in(0).address(), pixels, static_cast<uint32_t>(filters),
                                    isa::F32),
            block(t.in(1).address(), static_cast<uint32_t>(filters),
                  static_cast<uint32_t>(g.patch), isa::F32),
            block(patches, pixels, static_cast<uint32_t>(g.patch), isa::F32), false, l.precision,
            next_slot, [&](sim::InstrRef& load) { t.after_loads(load); },
            [&](sim::InstrRef& mm, bool) {
              // The products need only the tile's loads: the MXUs may work on this tile while
              // the vector unit still sums the last one into its images.
              t.after_loads(mm);
              t.fan_out(mm, 0);
            });
        // col2im reads what the MXUs wrote: its first op waits for them all.
        t.chain(t.join(b.fill(t.out(), 0)));
        if (g.flat) zero_wrapped(t, g, patches);
        for_each_window_run(g, t.out().address(), patches, t.rows(),
                            [&](const isa::Block& pixels_block, const isa::Block& windows) {
                              t.chain(b.binary(Vector::ADD, pixels_block, pixels_block, windows));
                            });
      });
  return absl::OkStatus();
}

// Kernel gradient: per tile of images, im2col into scratch (as the forward does) and the tile's
// output gradient transposed to [filters, pixels] beside it; g^T x patches on the MXUs (the
// patches as weights, 128 pixels deep at a time) accumulates [filters, patch] over all the tiles
// in the once-loaded region. After the last tile the sum is transposed to [patch, filters] and
// written.
absl::Status lower_conv_filter_grad(Lowering& l, int id, const ConvFusion& conv) {
  const Node& n = l.node(id);
  const Node& e = l.node(conv.patches);
  const Shape& in = l.node(e.inputs[0]).shape;
  const Im2col g(e.attrs.window, in, e.shape);
  const auto filters = static_cast<uint32_t>(n.shape.dim(1));
  const auto patch = static_cast<uint32_t>(g.patch);
  const auto image_cols = static_cast<uint32_t>(g.H * g.W * g.C);
  const auto patch_cols = static_cast<uint32_t>(g.OH * g.OW * g.patch);
  const auto grad_cols = static_cast<uint32_t>(g.OH * g.OW * filters);
  sim::CoreBuilder& b = l.emit.builder();
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  const isa::Block sums = l.emit.reduce_rows(
      static_cast<uint64_t>(in.dim(0)),
      {TileOperand{TileOperand::Kind::kFull, l.address(e.inputs[0]), isa::F32, image_cols},
       TileOperand{TileOperand::Kind::kFull, l.address(n.inputs[1]), isa::F32, grad_cols}},
      patch_cols + grad_cols, 2 * patch * filters, [&](Tile& t) {
        const uint64_t patches = t.scratch(0).address();
        const uint64_t grad_t = patches + uint64_t{t.rows()} * patch_cols * 4;
        const auto pixels = static_cast<uint32_t>(t.rows() * g.OH * g.OW);
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
  const isa::Block result = block(sums.address() + uint64_t{patch} * filters * 4, patch, filters,
                                  isa::F32);
  last.chain(last.join(b.transpose(result, block(sums.address(), filters, patch, isa::F32))));
  last.store(result, block(l.address(id), patch, filters, isa::F32), last.chain_count());
  return absl::OkStatus();
}

}  // namespace

absl::Status lower_conv(Lowering& l, int id, const ConvFusion& conv) {
  switch (conv.kind) {
    case ConvFusion::Kind::kForward:
      return lower_conv_forward(l, id, conv);
    case ConvFusion::Kind::kInputGrad:
      return lower_conv_input_grad(l, id, conv);
    case ConvFusion::Kind::kFilterGrad:
      break;
  }
  return lower_conv_filter_grad(l, id, conv);
}

}  // namespace tpusim::runtime::tpusim_backend
