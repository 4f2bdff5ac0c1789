// Lowering of image patches: im2col (extract_patches) and its adjoint (patches_to_image).
#include <algorithm>
#include <vector>

#include <absl/status/statusor.h>

#include "common/strings.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;

namespace {

// A band of rows of every image: window rows [oy0, oy0 + g.OH) and the image rows
// [y0, y0 + g.H) they read, with `g` the geometry of im2col over the band as an image of its own
// (the window's top padding shifted so that its rows line up). One band of all the rows is the
// whole image. `carried`: image rows at the band's top that an earlier band added into too.
struct Band {
  Im2col g;
  int64_t oy0, y0;
  int64_t carried = 0;
};

Band make_band(const Im2col& full, int64_t oy0, int64_t oy1, int64_t y0, int64_t y1) {
  Window w = full.w;
  w.pad_top = full.w.pad_top - oy0 * full.w.sh + y0;
  return Band{Im2col(w, Shape({1, y1 - y0, full.W, full.C}), Shape({1, oy1 - oy0, full.OW, 1})),
              oy0, y0};
}

// The image rows windows [oy0, oy1) read, clipped to the image.
Band band_of_windows(const Im2col& g, int64_t oy0, int64_t oy1) {
  const int64_t y0 = std::clamp(oy0 * g.w.sh - g.w.pad_top, int64_t{0}, g.H - 1);
  const int64_t y1 = std::clamp((oy1 - 1) * g.w.sh - g.w.pad_top + g.w.kh, y0 + 1, g.H);
  return make_band(g, oy0, oy1, y0, y1);
}

// The windows that add into image rows [y0, y1) (at least one, which may add nothing there when
// the stride skips those rows).
Band band_of_rows(const Im2col& g, int64_t y0, int64_t y1) {
  const int64_t first = y0 + g.w.pad_top - g.w.kh + 1;  // the first window row reaching y0 ...
  int64_t oy0 = first <= 0 ? 0 : (first + g.w.sh - 1) / g.w.sh;  // ... rounded up to a stride
  int64_t oy1 = std::min(g.OH, (y1 - 1 + g.w.pad_top) / g.w.sh + 1);
  oy0 = std::min(oy0, g.OH - 1);
  oy1 = std::max(oy1, oy0 + 1);
  return make_band(g, oy0, oy1, y0, y1);
}

// How a fragment too big for a VMEM tile is cut into bands.
enum class Cut {
  kWindowRows,  // extract_patches: each band reads the image rows its windows need
  kImageRows,   // patches_to_image: each band adds the windows that reach its image rows
  // patches_to_image where one image row and its windows do not fit: bands of window rows, each
  // adding into the image rows from where the previous band's end (so that every row is written,
  // those no window reaches with zeros) to where its windows reach (the last band to the
  // image's end), the rows the previous band added into too carried: loaded and added onto.
  kCarriedWindowRows,
};

// The bands a fragment works in: the whole image when one image's pixels and patches fit a
// VMEM tile, else bands as tall as fit, cut as `cut` says; an error naming the bytes one row
// needs when not even that fits.
absl::StatusOr<std::vector<Band>> bands(const Lowering& l, const Im2col& g, Cut cut) {
  auto fits = [&](const Band& b) {
    std::vector<uint64_t> widths{static_cast<uint64_t>(b.g.image_elements()),
                                 static_cast<uint64_t>(b.g.patch_elements())};
    if (b.carried > 0) widths.push_back(static_cast<uint64_t>(b.carried * g.W * g.C));
    if (cut == Cut::kWindowRows && phase_split(b.g))  // extract_patches' stride phases
      widths.push_back(static_cast<uint64_t>(phase_elements(b.g)));
    return Emitter::tile_bytes(widths, 1) <= l.emit.tile_budget_bytes();
  };
  // The whole image, as the same geometry, when it fits.
  if (const Band whole = make_band(g, 0, g.OH, 0, g.H); fits(whole)) return std::vector{whole};
  const int64_t rows = cut == Cut::kImageRows ? g.H : g.OH;
  int64_t written = 0;  // image rows the bands so far add into (kCarriedWindowRows)
  auto band = [&](int64_t r0, int64_t r1) {
    if (cut == Cut::kImageRows) return band_of_rows(g, r0, r1);
    Band b = band_of_windows(g, r0, r1);
    if (cut == Cut::kWindowRows) return b;
    const int64_t y0 = std::min(b.y0, written);
    const int64_t y1 = r1 == g.OH ? g.H : std::max(b.y0 + b.g.H, y0 + 1);
    b = make_band(g, r0, r1, y0, y1);
    b.carried = std::max<int64_t>(0, written - y0);
    return b;
  };
  std::vector<Band> out;
  for (int64_t r0 = 0; r0 < rows;) {
    int64_t r1 = rows;
    while (r1 > r0 + 1 && !fits(band(r0, r1))) --r1;
    const Band b = band(r0, r1);
    if (!fits(b)) {
      return absl::UnimplementedError(
          str_cat("tpusim backend: ",
                  cut == Cut::kImageRows ? "one image row and its windows" : "one row of windows",
                  " (", g.H, "x", g.W, "x", g.C, " images, ", g.OH, "x", g.OW, " windows of ",
                  g.patch, " values) need ", b.g.image_elements() * 4 + b.g.patch_elements() * 4,
                  " bytes of VMEM; the tile budget is ", l.emit.tile_budget_bytes()));
    }
    out.push_back(b);
    written = b.y0 + b.g.H;
    r0 = r1;
  }
  return out;
}

// The band's operand (or output) in an HBM tensor of whole images `cols` wide: rows of
// `band_elements` from `first_element` of each image.
TileOperand band_rows(uint64_t hbm, int64_t first_element, int64_t band_elements, int64_t cols) {
  TileOperand op{TileOperand::Kind::kFull, hbm + static_cast<uint64_t>(first_element) * 4, isa::F32,
                 static_cast<uint32_t>(band_elements)};
  if (band_elements < cols) op.stride = static_cast<uint64_t>(cols) * 4;
  return op;
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
