#include "runtime/backend/tpusim/conv_bands.h"

#include <algorithm>

#include "common/strings.h"

namespace tpusim::runtime::tpusim_backend {

namespace {

Band make_band(const Im2col& full, int64_t oy0, int64_t oy1, int64_t y0, int64_t y1) {
  Window w = full.w;
  w.pad_top = full.w.pad_top - oy0 * full.w.sh + y0;
  return Band{Im2col(w, Shape({1, y1 - y0, full.W, full.C}), Shape({1, oy1 - oy0, full.OW, 1}),
                     full.feed()),
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

}  // namespace

absl::StatusOr<std::vector<Band>> image_bands(uint64_t slot_bytes, const Im2col& g, Cut cut,
                                              const BandWidths& widths) {
  auto bytes = [&](const Band& b) { return Emitter::tile_bytes(widths(b), 1); };
  // The whole image, as the same geometry, when it fits.
  if (const Band whole = make_band(g, 0, g.OH, 0, g.H); bytes(whole) <= slot_bytes)
    return std::vector{whole};
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
    while (r1 > r0 + 1 && bytes(band(r0, r1)) > slot_bytes) --r1;
    const Band b = band(r0, r1);
    if (bytes(b) > slot_bytes) {
      return absl::UnimplementedError(str_cat(
          "tpusim backend: ",
          cut == Cut::kImageRows ? "one image row and its windows" : "one row of windows", " (",
          g.H, "x", g.W, "x", g.C, " images, ", g.OH, "x", g.OW, " windows of ", g.patch,
          " values) need ", bytes(b), " bytes of VMEM; the tile budget is ", slot_bytes));
    }
    out.push_back(b);
    written = b.y0 + b.g.H;
    r0 = r1;
  }
  return out;
}

Band whole_windows(const Im2col& g, const Band& rows) {
  return band_of_windows(g, rows.oy0, rows.oy0 + rows.g.OH);
}

TileOperand band_rows(uint64_t hbm, int64_t first_element, int64_t band_elements, int64_t cols) {
  TileOperand op{TileOperand::Kind::kFull, hbm + static_cast<uint64_t>(first_element) * 4, isa::F32,
                 static_cast<uint32_t>(band_elements)};
  if (band_elements < cols) op.stride = static_cast<uint64_t>(cols) * 4;
  return op;
}

}  // namespace tpusim::runtime::tpusim_backend
