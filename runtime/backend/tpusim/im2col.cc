#include "runtime/backend/tpusim/im2col.h"

#include "sim/isa/builder.h"

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

isa::Block f32_block(uint64_t at, int64_t rows, int64_t cols, int64_t stride) {
  return block(at, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), isa::F32,
               static_cast<uint64_t>(stride) * 4);
}

}  // namespace

// Per image and kernel row the rows outside its valid range, and per tile the wrapped columns.
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
      if (g.flat_tile) {
        run(ky, kx, 0, oy0, ox0, ((count - 1) * g.OH + oy1 - 1 - oy0) * g.OW + ox1 - ox0);
        continue;
      }
      for (int64_t r = 0; r < count; ++r) {
        if (g.flat) {
          run(ky, kx, r, oy0, ox0, (oy1 - 1 - oy0) * g.OW + ox1 - ox0);
          continue;
        }
        for (int64_t oy = oy0; oy < oy1; ++oy) run(ky, kx, r, oy, ox0, ox1 - ox0);
      }
    }
  }
}

void build_patches(Tile& t, const Im2col& g, uint64_t images, uint64_t patches) {
  sim::CoreBuilder& b = t.e_builder();
  if (!g.flat) {
    t.chain(b.fill(block(patches, t.rows(), static_cast<uint32_t>(g.OH * g.OW * g.patch), isa::F32),
                   0));
  }
  for_each_window_run(g, images, patches, t.rows(),
                      [&](const isa::Block& pixels, const isa::Block& windows) {
                        t.chain(b.unary(Vector::COPY, windows, pixels));
                      });
  if (g.flat) zero_wrapped(t, g, patches);
}

}  // namespace tpusim::runtime::tpusim_backend
