// Lowering of image patches: im2col (extract_patches) and its adjoint (patches_to_image).
#include <algorithm>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/tpusim/conv_bands.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;

namespace {

// The blocks a tile of im2col (kWindowRows) or col2im takes per image: its pixels, its patches,
// the stride phases im2col builds them from (im2col.h), the rows col2im carries.
BandWidths patch_widths(Cut cut) {
  return [cut](const Band& b) {
    std::vector<uint64_t> widths{static_cast<uint64_t>(b.g.image_elements()),
                                 static_cast<uint64_t>(b.g.patch_elements())};
    if (b.carried > 0) widths.push_back(static_cast<uint64_t>(b.carried * b.g.W * b.g.C));
    if (cut == Cut::kWindowRows && phase_split(b.g))
      widths.push_back(static_cast<uint64_t>(phase_elements(b.g)));
    return widths;
  };
}

absl::StatusOr<std::vector<Band>> bands(const Lowering& l, const Im2col& g, Cut cut) {
  return image_bands(l.emit.tile_budget_bytes(), g, cut, patch_widths(cut));
}

}  // namespace

// im2col in VMEM, a tile of whole images at a time: one DMA brings the images in, the patch rows
// are assembled by vector copies, one DMA takes them out. At stride 1 with the output as big as
// the input (SAME convolutions) consecutive windows (image, oy, ox) read consecutive pixels, so
// each kernel offset (ky, kx) is one strided copy for the whole tile (the flat view), and the
// windows that wrap round a row or image edge (the padding) are zeroed afterwards. Otherwise
// the patches start zeroed and each offset is one copy per image and output row, unless the
// windows' stride divides the image's width into phases as wide as the output (ResNet-50's 7x7
// stride-2 stem: 224 = 2 x 112): then the tile's images are split into their stride phases
// first and each offset is one copy per image, on its phase (im2col.h, phase_split). When one
// image's pixels and patches do not fit a tile (a small VMEM), one fragment per band of window
// rows does the same over the image rows that band reads (in the flat view, one copy per
// kernel offset and image for the band's windows: consecutive windows of a band still read
// consecutive pixels).
absl::Status lower_extract_patches(Lowering& l, int id) {
  const Node& n = l.node(id);
  const Shape& in = l.node(n.inputs[0]).shape;
  const Im2col g(n.attrs.window, in, n.shape);
  auto parts = bands(l, g, Cut::kWindowRows);
  if (!parts.ok()) return parts.status();
  for (const Band& band : *parts) {
    const Im2col& bg = band.g;
    const bool phased = phase_split(bg);
    l.emit.rowwise(band_rows(l.address(id), band.oy0 * g.OW * g.patch, bg.patch_elements(),
                             g.patch_elements()),
                   static_cast<uint64_t>(in.dim(0)),
                   {band_rows(l.address(n.inputs[0]), band.y0 * g.W * g.C, bg.image_elements(),
                              g.image_elements())},
                   phased ? 1 : 0, phased ? static_cast<uint32_t>(phase_elements(bg)) : 0,
                   [&](Tile& t) {
                     build_patches(t, bg, t.in(0).address(), t.out().address(),
                                   phased ? t.scratch(0).address() : 0);
                   });
  }
  return absl::OkStatus();
}

// Sums patches back into the image (the adjoint of im2col), a tile of whole images at a time in
// VMEM. For one kernel offset (ky, kx) distinct windows touch distinct pixels, so in the flat
// view (see lower_extract_patches) each offset is one vector add over the whole tile, and
// otherwise one per image and output row; offsets go in (ky, kx) order, so every pixel sums its
// contributions in a fixed order. In the flat view the wrapped windows of the patches are zeroed
// first, so that adding them changes nothing. When one image does not fit a tile, one fragment
// per band of image rows adds the windows that reach it (every pixel in one band, its
// contributions in the same order); when not even one image row and its windows fit, one per
// band of window rows, each carrying on from the partial sums of the rows it shares with the
// band before (those pixels then add the later band's windows after the earlier band's, a
// different order).
absl::Status lower_patches_to_image(Lowering& l, int id) {
  const Node& n = l.node(id);
  const Im2col g(n.attrs.window, n.shape, l.node(n.inputs[0]).shape);
  auto parts = bands(l, g, Cut::kImageRows);
  if (!parts.ok()) parts = bands(l, g, Cut::kCarriedWindowRows);
  if (!parts.ok()) return parts.status();
  for (const Band& band : *parts) {
    const Im2col& bg = band.g;
    std::vector<TileOperand> inputs{band_rows(l.address(n.inputs[0]), band.oy0 * g.OW * g.patch,
                                              bg.patch_elements(), g.patch_elements())};
    const int64_t carried = band.carried * g.W * g.C;
    if (carried > 0) {
      inputs.push_back(band_rows(l.address(id), band.y0 * g.W * g.C, carried, g.image_elements()));
    }
    l.emit.rowwise(
        band_rows(l.address(id), band.y0 * g.W * g.C, bg.image_elements(), g.image_elements()),
        static_cast<uint64_t>(n.shape.dim(0)), inputs, 0, 0, [&](Tile& t) {
          sim::CoreBuilder& cb = t.e_builder();
          const uint64_t patches = t.in(0).address();
          t.chain(cb.fill(t.out(), 0));
          if (carried > 0) {
            t.chain(cb.unary(Vector::COPY,
                             sim::block(t.out().address(), t.rows(), static_cast<uint32_t>(carried),
                                        isa::F32, static_cast<uint64_t>(bg.image_elements()) * 4),
                             t.in(1)));
          }
          if (bg.flat) zero_wrapped(t, bg, patches);
          for_each_window_run(bg, t.out().address(), patches, t.rows(),
                              [&](const isa::Block& pixels, const isa::Block& windows) {
                                t.chain(cb.binary(Vector::ADD, pixels, pixels, windows));
                              });
        });
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
