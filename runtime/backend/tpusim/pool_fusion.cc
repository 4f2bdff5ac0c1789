// Fused max pools (Fusion in lowering.h): which pools fuse, and their fragments.
//
// A pool whose windows tile the image (pool = stride, no padding, H = OH x stride) is separable
// into strided views of a tile of whole images in VMEM: window column kx of every window is the
// block of pixels kx, kx + sw, kx + 2 sw, ... of the tile's rows of pixels (one C-wide row per
// pixel), and window row ky, once the columns are reduced, the block of rows ky, ky + sh, ... of
// the tile's [images x H, OW x C] view. So a max pool is kw + kh - 2 vector maxes over the whole
// tile, and its gradient a few more, however many images and windows the tile holds: no
// windows are built, none of them reaches HBM.
#include <algorithm>

#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"

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

// For `id` = reduce_max(view, {3}), view = reshape(extract_patches(x)) [N, OH, OW, window, C]
// (layers::max_pooling2d with VALID padding), the extract_patches node; else -1.
int pooled_patches(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kReduceMax || n.attrs.axes != std::vector<int64_t>{3} || n.shape.rank() != 4)
    return -1;
  const Node& view = graph.node(n.inputs[0]);
  if (view.op != Op::kReshape || view.shape.rank() != 5) return -1;
  const int patches = under_reshapes(graph, n.inputs[0]);
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
  *out = {graph.node(patches).inputs[0], pooled, q.inputs[0]};
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
      // The images in, the pooled values out, the columns' maxima.
      if (tiles(g) && fits(core, {s.image, s.pooled, s.half}))
        found[id] = {Fusion::Kind::kMaxPool, {e.inputs[0]}};
    } else if (PoolGrad p; max_pool_grad(graph, id, &p)) {
      const Node& e = graph.node(pooled_patches(graph, p.pooled));
      const Im2col g(e.attrs.window, n.shape, e.shape);
      const PoolSizes s(g);
      // The images, pooled values and their gradients in, the images' gradients out, and one
      // scratch: the hits (image-sized), a columns-reduced buffer and the quotients.
      if (tiles(g) &&
          fits(core, {s.image, s.pooled, s.pooled, s.image, s.image + s.half + s.pooled}))
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
absl::Status lower_max_pool(Lowering& l, int id) {
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
//   half  = the hits summed over each window's columns, quotient = g / (half summed over its rows);
//   half  = quotient spread over each window's rows; out = hits x (half spread over its columns);
//   out  += 0, the scatter into a zeroed image (what patches_to_image adds the windows to; it
//   makes a -0 product +0, as there).
absl::Status lower_max_pool_grad(Lowering& l, int id, const Fusion& pool) {
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

}  // namespace

absl::Status lower_pool(Lowering& l, int id, const Fusion& pool) {
  switch (pool.kind) {
    case Fusion::Kind::kMaxPool:
      return lower_max_pool(l, id);
    case Fusion::Kind::kMaxPoolGrad:
      return lower_max_pool_grad(l, id, pool);
    default:
      break;
  }
  return absl::InternalError("tpusim backend: lower_pool of a fusion that is no pool");
}

}  // namespace tpusim::runtime::tpusim_backend
