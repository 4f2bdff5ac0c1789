// Fused max pools (Fusion in lowering.h): which pools fuse, and their fragments.
//
// A pool whose windows tile the image (pool = stride, no padding, H = OH x stride) is separable
// into strided views of a tile of whole images in VMEM: window column kx of every window is the
// block of pixels kx, kx + sw, kx + 2 sw, ... of the tile's rows of pixels (one C-wide row per
// pixel), and window row ky, once the columns are reduced, the block of rows ky, ky + sh, ... of
// the tile's [images x H, OW x C] view. So a max pool is kw + kh - 2 vector maxes over the whole
// tile, and its gradient a few more, however many images and windows the tile holds: no
// windows are built, none of them reaches HBM.
//
// A pool whose windows overlap (ResNet's 3x3 stride-2 SAME pool) or are padded is XLA's
// reduce-window and select-and-scatter over windows read where they lie: per tile of images (or
// band of their rows, conv_bands.h) its windows are built in VMEM as a convolution's patches
// are (im2col.h; the positions outside the image set to the graph's padding value), reduced
// over the window, and for the gradient compared with the pooled values, counted, divided and
// summed back into the image in VMEM; the windows never reach HBM either.
#include <algorithm>

#include "runtime/backend/tpusim/conv_bands.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"
#include "sim/numerics/bf16.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// The node under any reshapes of `id`.
int under_reshapes(const Graph& graph, int id) {
  while (graph.node(id).op == Op::kReshape) id = graph.node(id).inputs[0];
  return id;
}

// Whether a window tiles its images: a whole number of windows, side by side.
bool tiles(const Im2col& g) {
  const Window& w = g.w;
  return w.pad_top == 0 && w.pad_left == 0 && w.kh == w.sh && w.kw == w.sw && g.H == g.OH * w.sh &&
         g.W == g.OW * w.sw;
}

bool same_window(const Window& a, const Window& b) {
  return a.kh == b.kh && a.kw == b.kw && a.sh == b.sh && a.sw == b.sw && a.same == b.same &&
         a.explicit_padding == b.explicit_padding && a.pad_top == b.pad_top &&
         a.pad_left == b.pad_left && a.pad_bottom == b.pad_bottom && a.pad_right == b.pad_right;
}

// Whether `id` is a padded pool's mask over windows `w`, (1 - inside) * c with inside the
// windows of a tensor of ones (layers::max_pool): c at the positions outside the image, -0 inside.
bool padding_mask(const Graph& graph, int id, const Window& w, float* c) {
  const Node& m = graph.node(id);
  if (m.op != Op::kMul || !foldable_scalar(graph, m.inputs[1], c)) return false;
  const Node& outside = graph.node(m.inputs[0]);
  float one = 0;
  if (outside.op != Op::kSub || !foldable_scalar(graph, outside.inputs[0], &one) || one != 1.0f)
    return false;
  const Node& inside = graph.node(under_reshapes(graph, outside.inputs[1]));
  if (inside.op != Op::kExtractPatches || !same_window(inside.attrs.window, w)) return false;
  int ones = inside.inputs[0];
  while (graph.node(ones).op == Op::kCast) ones = graph.node(ones).inputs[0];
  return foldable_scalar(graph, ones, &one) && one == 1.0f;
}

// For `id` = reduce_max(view, {3}), view = reshape(extract_patches(x)) [N, OH, OW, window, C]
// (layers::max_pooling2d), or that view plus a padding mask (padding_mask), the extract_patches
// node; else -1. `pad`: what the view holds outside the image (c in the view's dtype; 0 without
// a mask).
int pooled_patches(const Graph& graph, int id, float* pad = nullptr) {
  const Node& n = graph.node(id);
  if (n.op != Op::kReduceMax || n.attrs.axes != std::vector<int64_t>{3} || n.shape.rank() != 4)
    return -1;
  int view_id = n.inputs[0];
  float c = 0;
  if (const Node& padded = graph.node(view_id); padded.op == Op::kAdd) {
    const Node& e = graph.node(under_reshapes(graph, padded.inputs[0]));
    if (e.op != Op::kExtractPatches || !padding_mask(graph, padded.inputs[1], e.attrs.window, &c))
      return -1;
    if (padded.dtype == DType::kBF16) c = sim::round_to_bf16(c);
    view_id = padded.inputs[0];
  }
  if (pad != nullptr) *pad = c;
  const Node& view = graph.node(view_id);
  if (view.op != Op::kReshape || view.shape.rank() != 5) return -1;
  const int patches = under_reshapes(graph, view_id);
  const Node& e = graph.node(patches);
  if (e.op != Op::kExtractPatches || e.shape.rank() != 4) return -1;
  const Window& w = e.attrs.window;
  const Shape& image = graph.node(e.inputs[0]).shape;
  const bool windows_split = view.shape.dim(0) == e.shape.dim(0) &&
                             view.shape.dim(1) == e.shape.dim(1) &&
                             view.shape.dim(2) == e.shape.dim(2) &&
                             view.shape.dim(3) == w.kh * w.kw && view.shape.dim(4) == image.dim(3);
  return windows_split ? patches : -1;
}

// `id` with its rank-4 [N, OH, OW, C] source broadcast over the windows' axis 3, as autodiff's
// expand_reduced makes it: the source, else -1.
int expanded_over_windows(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kBroadcast || n.attrs.axes != std::vector<int64_t>{0, 1, 2, 4}) return -1;
  return graph.node(n.inputs[0]).shape.rank() == 4 ? n.inputs[0] : -1;
}

struct PoolGrad {
  int image = -1, pooled = -1, grad = -1;
  int quotient = -1;  // g / the windows' counts of maxima
};

// For `id` = patches_to_image(reshape(hit * broadcast(g / reduce_sum(hit, {3})))), hit =
// equal(view, broadcast(pooled)), pooled = reduce_max(view, {3}) a pool pooled_patches
// recognises with the same window: the image, the pooled values and g.
bool max_pool_grad(const Graph& graph, int id, PoolGrad* out) {
  const Node& n = graph.node(id);
  if (n.op != Op::kPatchesToImage) return false;
  const Node& m = graph.node(under_reshapes(graph, n.inputs[0]));
  if (m.op != Op::kMul) return false;
  const int hit = m.inputs[0];
  const Node& h = graph.node(hit);
  if (h.op != Op::kEqual) return false;
  const int pooled = expanded_over_windows(graph, h.inputs[1]);
  if (pooled < 0) return false;
  const int patches = pooled_patches(graph, pooled);
  if (patches < 0 || graph.node(pooled).inputs[0] != h.inputs[0] ||
      !same_window(graph.node(patches).attrs.window, n.attrs.window) ||
      graph.node(graph.node(patches).inputs[0]).shape != n.shape)
    return false;
  const int quotient = expanded_over_windows(graph, m.inputs[1]);
  if (quotient < 0 || graph.node(quotient).op != Op::kDiv) return false;
  const Node& q = graph.node(quotient);
  const Node& count = graph.node(q.inputs[1]);
  if (count.op != Op::kReduceSum || count.attrs.axes != std::vector<int64_t>{3} ||
      count.inputs[0] != hit)
    return false;
  *out = {graph.node(patches).inputs[0], pooled, q.inputs[0], quotient};
  return true;
}

// Per image, in f32 elements: the image, the pooled values, the columns-reduced rows
// [H, OW, C].
struct PoolSizes {
  int64_t image, pooled, half;
  explicit PoolSizes(const Im2col& g)
      : image(g.image_elements()), pooled(g.pixels() * g.C), half(g.H * g.OW * g.C) {}
};

bool fits(const config::CoreSpec& core, const std::vector<int64_t>& widths) {
  const std::vector<uint64_t> w(widths.begin(), widths.end());
  return Emitter::tile_bytes(w, 1) <= tile_slot_bytes(core);
}

// Per image, the blocks of a band's tile for pools whose windows do not tile the image (the
// windowed lowerings below): the forward's images in, pooled values out, the windows (and the
// stride phases they are built from); the gradient's images (the rows its windows read),
// pooled values and their gradients in, the image rows' gradients out, the windows, their
// counts of maxima (and the phases) in one scratch.
BandWidths windowed_forward_widths() {
  return [](const Band& b) {
    const Im2col& g = b.g;
    return std::vector<uint64_t>{static_cast<uint64_t>(g.image_elements()),
                                 static_cast<uint64_t>(g.pixels() * g.C),
                                 static_cast<uint64_t>(g.patch_elements() + phase_elements(g))};
  };
}

BandWidths windowed_grad_widths(const Im2col& full) {
  return [full](const Band& b) {
    const Im2col& w = whole_windows(full, b).g;
    const auto pooled = static_cast<uint64_t>(w.pixels() * w.C);
    return std::vector<uint64_t>{static_cast<uint64_t>(w.image_elements()), pooled, pooled,
                                 static_cast<uint64_t>(b.g.image_elements()),
                                 static_cast<uint64_t>(w.patch_elements() + phase_elements(w)) +
                                     pooled};
  };
}

}  // namespace

Fusions find_pool_fusions(const Graph& graph, const std::vector<bool>& needed,
                          const config::CoreSpec& core) {
  Fusions found;
  for (int id = 0; id < graph.size(); ++id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    const Node& n = graph.node(id);
    if (const int patches = pooled_patches(graph, id); patches >= 0) {
      const Node& e = graph.node(patches);
      const Im2col g(e.attrs.window, graph.node(e.inputs[0]).shape, e.shape);
      const PoolSizes s(g);
      // Tiled: the images in, the pooled values out, the columns' maxima. Else windowed.
      if (tiles(g) ? fits(core, {s.image, s.pooled, s.half})
                   : image_bands(tile_slot_bytes(core), g, Cut::kWindowRows,
                                 windowed_forward_widths())
                         .ok())
        found[id] = {Fusion::Kind::kMaxPool, {e.inputs[0]}};
    } else if (PoolGrad p; max_pool_grad(graph, id, &p)) {
      const Node& e = graph.node(pooled_patches(graph, p.pooled));
      const Im2col g(e.attrs.window, n.shape, e.shape);
      const PoolSizes s(g);
      // The images, pooled values and their gradients in, the images' gradients out, and one
      // scratch: the hits (image-sized), a columns-reduced buffer and the quotients.
      if (tiles(g) ? fits(core, {s.image, s.pooled, s.pooled, s.image, s.image + s.half + s.pooled})
                   : image_bands(tile_slot_bytes(core), g, Cut::kImageRows,
                                 windowed_grad_widths(g))
                         .ok())
        found[id] = {Fusion::Kind::kMaxPoolGrad, {p.image, p.pooled, p.grad}};
    }
  }
  return found;
}

namespace {

// The tile's views (all f32, in VMEM) for images of the geometry `g`: `rows` images.
struct PoolViews {
  const Im2col& g;
  uint32_t rows;
  // Window column kx of every window of the images at `images`: [images x H x OW, C], one pixel
  // of each sw.
  isa::Block column(uint64_t images, int64_t kx) const {
    return block(images + static_cast<uint64_t>(kx * g.C) * 4,
                 static_cast<uint32_t>(rows * g.H * g.OW), static_cast<uint32_t>(g.C), isa::F32,
                 static_cast<uint64_t>(g.w.sw * g.C) * 4);
  }
  // The same rows dense, as in a columns-reduced buffer [images x H x OW, C].
  isa::Block half_pixels(uint64_t half) const {
    return block(half, static_cast<uint32_t>(rows * g.H * g.OW), static_cast<uint32_t>(g.C),
                 isa::F32);
  }
  // Window row ky of a columns-reduced buffer: [images x OH, OW x C], one row of each sh.
  isa::Block row(uint64_t half, int64_t ky) const {
    return block(half + static_cast<uint64_t>(ky * g.OW * g.C) * 4,
                 static_cast<uint32_t>(rows * g.OH), static_cast<uint32_t>(g.OW * g.C), isa::F32,
                 static_cast<uint64_t>(g.w.sh * g.OW * g.C) * 4);
  }
  // Pooled values [images x OH, OW x C], the shape of row().
  isa::Block pooled(uint64_t at) const {
    return block(at, static_cast<uint32_t>(rows * g.OH), static_cast<uint32_t>(g.OW * g.C),
                 isa::F32);
  }
};

// dst = op over the `count` blocks view(0) .. view(count - 1), in order (a copy for one).
void reduce_views(Tile& t, Vector::Op op, const isa::Block& dst, int64_t count,
                  const std::function<isa::Block(int64_t)>& view) {
  sim::CoreBuilder& b = t.e_builder();
  if (count == 1) {
    t.chain(b.unary(Vector::COPY, dst, view(0)));
    return;
  }
  t.chain(b.binary(op, dst, view(0), view(1)));
  for (int64_t k = 2; k < count; ++k) t.chain(b.binary(op, dst, dst, view(k)));
}

// Forward: the maximum over each window's columns into scratch, then over its rows into the
// tile's output.
absl::Status lower_tiled_max_pool(Lowering& l, int id) {
  const Node& n = l.node(id);
  const Node& e = l.node(under_reshapes(l.graph, n.inputs[0]));
  const Im2col g(e.attrs.window, l.node(e.inputs[0]).shape, e.shape);
  const PoolSizes s(g);
  l.emit.rowwise(l.address(id), static_cast<uint64_t>(n.shape.dim(0)),
                 static_cast<uint32_t>(s.pooled), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, l.address(e.inputs[0]), isa::F32,
                              static_cast<uint32_t>(s.image)}},
                 1, static_cast<uint32_t>(s.half), [&](Tile& t) {
                   const PoolViews v{g, t.rows()};
                   const uint64_t half = t.scratch(0).address();
                   reduce_views(t, Vector::MAX, v.half_pixels(half), g.w.kw,
                                [&](int64_t kx) { return v.column(t.in(0).address(), kx); });
                   reduce_views(t, Vector::MAX, v.pooled(t.out().address()), g.w.kh,
                                [&](int64_t ky) { return v.row(half, ky); });
                 });
  return absl::OkStatus();
}

// Gradient, as XLA's select-and-scatter computes it but with the graph's ties (each of a
// window's equal maxima gets g / their count, as reduce_max's gradient divides it):
//   half  = pooled spread over each window's rows; hits = (x == half spread over its columns);
//   half  = the hits summed over each window's columns, quotient = g / (half summed over its rows)
//           (a bf16 quotient not rounded: each pixel takes one window's, rounded with the result);
//   half  = quotient spread over each window's rows; out = hits x (half spread over its columns);
//   out  += 0, the scatter into a zeroed image (what patches_to_image adds the windows to; it
//   makes a -0 product +0, as there).
absl::Status lower_tiled_max_pool_grad(Lowering& l, int id, const Fusion& pool) {
  const Node& n = l.node(id);
  const Node& e = l.node(pooled_patches(l.graph, pool.reads[1]));
  const Im2col g(e.attrs.window, n.shape, e.shape);
  const PoolSizes s(g);
  std::vector<TileOperand> in;
  for (size_t i = 0; i < pool.reads.size(); ++i) {
    in.push_back(TileOperand{TileOperand::Kind::kFull, l.address(pool.reads[i]), isa::F32,
                             static_cast<uint32_t>(i == 0 ? s.image : s.pooled)});
  }
  l.emit.rowwise(
      l.address(id), static_cast<uint64_t>(n.shape.dim(0)), static_cast<uint32_t>(s.image),
      isa::F32, in, 1, static_cast<uint32_t>(s.image + s.half + s.pooled), [&](Tile& t) {
        sim::CoreBuilder& b = t.e_builder();
        const PoolViews v{g, t.rows()};
        const uint64_t hits = t.scratch(0).address();
        const uint64_t half = hits + uint64_t{t.rows()} * static_cast<uint64_t>(s.image) * 4;
        const uint64_t quotient = half + uint64_t{t.rows()} * static_cast<uint64_t>(s.half) * 4;
        const uint64_t x = t.in(0).address(), out = t.out().address();
        for (int64_t ky = 0; ky < g.w.kh; ++ky)
          t.chain(b.unary(Vector::COPY, v.row(half, ky), v.pooled(t.in(1).address())));
        for (int64_t kx = 0; kx < g.w.kw; ++kx) {
          t.chain(
              b.binary(Vector::CMP_EQ, v.column(hits, kx), v.column(x, kx), v.half_pixels(half)));
        }
        reduce_views(t, Vector::ADD, v.half_pixels(half), g.w.kw,
                     [&](int64_t kx) { return v.column(hits, kx); });
        reduce_views(t, Vector::ADD, v.pooled(quotient), g.w.kh,
                     [&](int64_t ky) { return v.row(half, ky); });
        t.chain(b.binary(Vector::DIV, v.pooled(quotient), v.pooled(t.in(2).address()),
                         v.pooled(quotient)));
        for (int64_t ky = 0; ky < g.w.kh; ++ky)
          t.chain(b.unary(Vector::COPY, v.row(half, ky), v.pooled(quotient)));
        for (int64_t kx = 0; kx < g.w.kw; ++kx) {
          t.chain(
              b.binary(Vector::MUL, v.column(out, kx), v.column(hits, kx), v.half_pixels(half)));
        }
        t.chain(b.binary_scalar(Vector::ADD, t.out(), t.out(), 0.0f));
        // A bf16 gradient (patches_to_image's sums): rounded before it leaves.
        if (n.dtype == DType::kBF16) t.chain(b.unary(Vector::ROUND_BF16, t.out(), t.out()));
      });
  return absl::OkStatus();
}

// The window's k-th C-wide column of `pixels` windows of `g` at `windows` (its positions (ky, kx)
// in order k = ky kw + kx, as im2col lays them out).
isa::Block window_position(const Im2col& g, uint64_t windows, uint32_t pixels, int64_t k) {
  return block(windows + static_cast<uint64_t>(k * g.C) * 4, pixels, static_cast<uint32_t>(g.C),
               isa::F32, static_cast<uint64_t>(g.patch) * 4);
}

// Forward of a pool whose windows do not tile the image, as XLA's reduce-window: per tile of
// images and band of their output rows, the windows built in scratch (the positions outside the
// image set to the view's padding value), then their maximum over the window's positions in
// order into the tile's output.
absl::Status lower_windowed_max_pool(Lowering& l, int id) {
  const Node& n = l.node(id);
  float pad = 0;
  const Node& e = l.node(pooled_patches(l.graph, id, &pad));
  const Im2col g(e.attrs.window, l.node(e.inputs[0]).shape, e.shape);
  const auto parts =
      image_bands(l.emit.tile_budget_bytes(), g, Cut::kWindowRows, windowed_forward_widths());
  if (!parts.ok()) return parts.status();
  std::vector<TileBand> bands;
  for (const Band& band : *parts) {
    const Im2col& bg = band.g;
    bands.push_back({band_rows(l.address(id), band.oy0 * g.OW * g.C, bg.pixels() * g.C,
                               g.pixels() * g.C),
                     {band_rows(l.address(e.inputs[0]), band.y0 * g.W * g.C, bg.image_elements(),
                                g.image_elements())},
                     static_cast<uint32_t>(bg.patch_elements() + phase_elements(bg))});
  }
  l.emit.rowwise_bands(static_cast<uint64_t>(n.shape.dim(0)), bands, 1, 0, [&](Tile& t, size_t i) {
    const Im2col& bg = (*parts)[i].g;
    const uint64_t windows = t.scratch(0).address();
    const auto pixels = static_cast<uint32_t>(t.rows() * bg.pixels());
    // From the band's stride phases, after the windows in the scratch, where it splits into them.
    build_patches(t, bg, t.in(0).address(), windows,
                  windows + uint64_t{pixels} * static_cast<uint64_t>(g.patch) * 4, pad);
    reduce_views(t, Vector::MAX,
                 block(t.out().address(), pixels, static_cast<uint32_t>(g.C), isa::F32),
                 g.w.kh * g.w.kw, [&](int64_t k) { return window_position(g, windows, pixels, k); });
  });
  return absl::OkStatus();
}

// Gradient of a pool whose windows do not tile the image, as XLA's select-and-scatter with the
// graph's ties: per tile of images and band of their rows, the windows that reach the band built
// whole from the image rows they read; each position's hit (equal to its window's pooled value),
// the hits counted per window, the quotient g / count, hit x quotient at each position, and
// those summed into the band's pixels (zeroed first) in (ky, kx) order, as patches_to_image
// sums them. A bf16 quotient and result are rounded where the unfused ops round them.
absl::Status lower_windowed_max_pool_grad(Lowering& l, int id, const Fusion& pool) {
  const Node& n = l.node(id);
  PoolGrad p;
  if (!max_pool_grad(l.graph, id, &p))
    return absl::InternalError("tpusim backend: a fused max pool gradient that is none");
  float pad = 0;
  const Node& e = l.node(pooled_patches(l.graph, p.pooled, &pad));
  const Im2col g(e.attrs.window, n.shape, e.shape);
  const auto parts =
      image_bands(l.emit.tile_budget_bytes(), g, Cut::kImageRows, windowed_grad_widths(g));
  if (!parts.ok()) return parts.status();
  std::vector<TileBand> bands;
  std::vector<Band> whole;  // per band, its windows with all the image rows they read
  for (const Band& band : *parts) {
    const Band& windows = whole.emplace_back(whole_windows(g, band));
    const Im2col& w = windows.g;
    const int64_t pooled = w.pixels() * g.C;
    bands.push_back({band_rows(l.address(id), band.y0 * g.W * g.C, band.g.image_elements(),
                               g.image_elements()),
                     {band_rows(l.address(pool.reads[0]), windows.y0 * g.W * g.C,
                                w.image_elements(), g.image_elements()),
                      band_rows(l.address(pool.reads[1]), band.oy0 * g.OW * g.C, pooled,
                                g.pixels() * g.C),
                      band_rows(l.address(pool.reads[2]), band.oy0 * g.OW * g.C, pooled,
                                g.pixels() * g.C)},
                     static_cast<uint32_t>(w.patch_elements() + pooled + phase_elements(w))});
  }
  const bool round_quotient = l.node(p.quotient).dtype == DType::kBF16;
  l.emit.rowwise_bands(static_cast<uint64_t>(n.shape.dim(0)), bands, 1, 0, [&](Tile& t, size_t i) {
    sim::CoreBuilder& b = t.e_builder();
    const Im2col& w = whole[i].g;
    const auto pixels = static_cast<uint32_t>(t.rows() * w.pixels());
    const uint64_t windows = t.scratch(0).address();
    const isa::Block count =
        block(windows + uint64_t{pixels} * static_cast<uint64_t>(g.patch) * 4, pixels,
              static_cast<uint32_t>(g.C), isa::F32);
    // Whole, from their stride phases (after the counts) where they split into them.
    build_patches(t, w, t.in(0).address(), windows,
                  count.address() + uint64_t{pixels} * static_cast<uint64_t>(g.C) * 4, pad);
    const isa::Block pooled = block(t.in(1).address(), pixels, static_cast<uint32_t>(g.C), isa::F32);
    const int64_t positions = g.w.kh * g.w.kw;
    auto at = [&](int64_t k) { return window_position(g, windows, pixels, k); };
    for (int64_t k = 0; k < positions; ++k)
      t.chain(b.binary(Vector::CMP_EQ, at(k), at(k), pooled));
    reduce_views(t, Vector::ADD, count, positions, at);
    t.chain(b.binary(Vector::DIV, count,
                     block(t.in(2).address(), pixels, static_cast<uint32_t>(g.C), isa::F32), count));
    if (round_quotient) t.chain(b.unary(Vector::ROUND_BF16, count, count));
    for (int64_t k = 0; k < positions; ++k) t.chain(b.binary(Vector::MUL, at(k), at(k), count));
    t.chain(b.fill(t.out(), 0));
    for_each_window_run((*parts)[i].g, t.out().address(), windows, t.rows(),
                        [&](const isa::Block& pixels_block, const isa::Block& positions_block) {
                          t.chain(b.binary(Vector::ADD, pixels_block, pixels_block, positions_block));
                        });
    if (n.dtype == DType::kBF16) t.chain(b.unary(Vector::ROUND_BF16, t.out(), t.out()));
  });
  return absl::OkStatus();
}

// The pool `id` computes: its windows' geometry.
Im2col pool_geometry(const Lowering& l, int id, const Fusion& pool) {
  const int pooled = pool.kind == Fusion::Kind::kMaxPool ? id : pool.reads[1];
  const Node& e = l.node(pooled_patches(l.graph, pooled));
  return Im2col(e.attrs.window, l.node(e.inputs[0]).shape, e.shape);
}

}  // namespace

absl::Status lower_pool(Lowering& l, int id, const Fusion& pool) {
  const bool tiled = tiles(pool_geometry(l, id, pool));
  switch (pool.kind) {
    case Fusion::Kind::kMaxPool:
      return tiled ? lower_tiled_max_pool(l, id) : lower_windowed_max_pool(l, id);
    case Fusion::Kind::kMaxPoolGrad:
      return tiled ? lower_tiled_max_pool_grad(l, id, pool)
                   : lower_windowed_max_pool_grad(l, id, pool);
    default:
      break;
  }
  return absl::InternalError("tpusim backend: lower_pool of a fusion that is no pool");
}

}  // namespace tpusim::runtime::tpusim_backend
