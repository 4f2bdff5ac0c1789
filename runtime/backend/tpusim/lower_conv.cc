// Lowering of image patches: im2col (extract_patches) and its adjoint (patches_to_image).
#include "common/strings.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;

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
      [&](Tile& t) { build_patches(t, g, t.in(0).address(), t.out().address()); });
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
