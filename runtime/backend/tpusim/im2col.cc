#include "runtime/backend/tpusim/im2col.h"

#include "common/align.h"
#include "sim/isa/builder.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

bool valid_window_columns(const Window& w, int64_t kx, int64_t out_w, int64_t in_w, int64_t* ox0,
                          int64_t* ox1, int64_t* x0) {
  *ox0 = 0;
  while (*ox0 < out_w && *ox0 * w.sw + kx - w.pad_left < 0) ++*ox0;
  *ox1 = out_w;
  while (*ox1 > *ox0 && (*ox1 - 1) * w.sw + kx - w.pad_left >= in_w) --*ox1;
  *x0 = *ox0 * w.sw + kx - w.pad_left;
  return *ox1 > *ox0;
}

void valid_window_rows(const Window& w, int64_t ky, int64_t out_h, int64_t in_h, int64_t* oy0,
                       int64_t* oy1) {
  *oy0 = 0;
  *oy1 = out_h;
  while (*oy0 < out_h && *oy0 * w.sh + ky - w.pad_top < 0) ++*oy0;
  while (*oy1 > *oy0 && (*oy1 - 1) * w.sh + ky - w.pad_top >= in_h) --*oy1;
}

namespace {

isa::Block f32_block(uint64_t at, int64_t rows, int64_t cols, int64_t stride) {
  return block(at, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), isa::F32,
               static_cast<uint64_t>(stride) * 4);
}

}  // namespace

// Per image and kernel row the rows outside its valid range, and per tile the wrapped columns.
void zero_wrapped(Tile& t, const Im2col& g, uint64_t patches, float pad) {
  sim::CoreBuilder& b = t.e_builder();
  const Window& w = g.w;
  for (int64_t ky = 0; ky < w.kh; ++ky) {
    int64_t oy0 = 0, oy1 = 0;
    valid_window_rows(w, ky, g.OH, g.H, &oy0, &oy1);
    for (int64_t r = 0; r < static_cast<int64_t>(t.rows()); ++r) {
      for (auto [from, to] : {std::pair{int64_t{0}, oy0}, std::pair{oy1, g.OH}}) {
        if (to <= from) continue;
        const uint64_t at =
            patches +
            static_cast<uint64_t>(((r * g.OH + from) * g.OW) * g.patch + ky * w.kw * g.C) * 4;
        t.chain(b.fill(f32_block(at, (to - from) * g.OW, w.kw * g.C, g.patch), pad));
      }
    }
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      int64_t ox0 = 0, ox1 = 0, x0 = 0;
      valid_window_columns(w, kx, g.OW, g.W, &ox0, &ox1, &x0);
      for (int64_t ox = 0; ox < g.OW; ++ox) {
        if (ox >= ox0 && ox < ox1) continue;
        const uint64_t at =
            patches + static_cast<uint64_t>(ox * g.patch + (ky * w.kw + kx) * g.C) * 4;
        t.chain(b.fill(f32_block(at, t.rows() * g.OH, g.C, g.OW * g.patch), pad));
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
    valid_window_rows(w, ky, g.OH, g.H, &oy0, &oy1);
    if (oy1 <= oy0) continue;
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      int64_t ox0 = 0, ox1 = 0, x0 = 0;
      if (!valid_window_columns(w, kx, g.OW, g.W, &ox0, &ox1, &x0)) continue;
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

namespace {

// The stride phases of a tile of `rows` images in VMEM at `base`: image pixel (y, x) is pixel
// (y / sh, x / sw) of phase (y % sh, x % sw), an image of its own, Hp(py) x Wp, where Wp = W / sw.
// First the column phases, [rows, H, Wp, C] each; after them the row phases of each, [rows,
// Hp(py), Wp, C], in (py, px) order.
struct Phases {
  const Im2col& g;
  int64_t rows;
  uint64_t base;
  int64_t wp() const { return g.W / g.w.sw; }
  int64_t hp(int64_t py) const { return (g.H - py + g.w.sh - 1) / g.w.sh; }
  uint64_t column(int64_t px) const {
    return base + static_cast<uint64_t>(px * rows * g.H * wp() * g.C) * 4;
  }
  uint64_t phase(int64_t py, int64_t px) const {
    int64_t at = rows * g.image_elements();
    for (int64_t p = 0; p < py; ++p) at += rows * hp(p) * g.W * g.C;
    at += px * rows * hp(py) * wp() * g.C;
    return base + static_cast<uint64_t>(at) * 4;
  }
};

// The tile's images split into their stride phases: one strided copy a column phase for the whole
// tile (W is a multiple of sw, so pixel x's phase is its index's), then one a row phase, for the
// whole tile when H is a multiple of sh, else for each image.
void split_phases(Tile& t, const Phases& p, uint64_t images) {
  sim::CoreBuilder& b = t.e_builder();
  const Im2col& g = p.g;
  const int64_t sw = g.w.sw, sh = g.w.sh, wp = p.wp();
  for (int64_t px = 0; px < sw; ++px) {
    t.chain(b.unary(
        Vector::COPY, f32_block(p.column(px), p.rows * g.H * wp, g.C, g.C),
        f32_block(images + static_cast<uint64_t>(px * g.C) * 4, p.rows * g.H * wp, g.C, sw * g.C)));
  }
  for (int64_t py = 0; py < sh; ++py) {
    const int64_t hp = p.hp(py);
    if (hp == 0) continue;  // a band of fewer rows than the stride: no row in this phase
    for (int64_t px = 0; px < sw; ++px) {
      const uint64_t from = p.column(px) + static_cast<uint64_t>(py * wp * g.C) * 4;
      if (g.H % sh == 0) {
        t.chain(b.unary(Vector::COPY, f32_block(p.phase(py, px), p.rows * hp, wp * g.C, wp * g.C),
                        f32_block(from, p.rows * hp, wp * g.C, sh * wp * g.C)));
        continue;
      }
      for (int64_t r = 0; r < p.rows; ++r) {
        t.chain(b.unary(Vector::COPY,
                        f32_block(p.phase(py, px) + static_cast<uint64_t>(r * hp * wp * g.C) * 4,
                                  hp, wp * g.C, wp * g.C),
                        f32_block(from + static_cast<uint64_t>(r * g.H * wp * g.C) * 4, hp,
                                  wp * g.C, sh * wp * g.C)));
      }
    }
  }
}

// Strided windows from the images' stride phases: window (oy, ox) at kernel offset (ky, kx) reads
// image pixel (sh oy + ky - pad_top, sw ox + kx - pad_left), which is pixel (oy + qy, ox + qx) of
// phase ((ky - pad_top) mod sh, (kx - pad_left) mod sw), q the floor of the division. A phase is
// OW pixels wide, so consecutive windows of an image read consecutive pixels of one phase: one
// copy per kernel offset and image (the flat view's, on the phase), where copying the windows
// of each output row took OH copies; the windows that wrap round a phase's edge are zeroed
// after, as the flat view's.
void phased_patches(Tile& t, const Im2col& g, uint64_t images, uint64_t patches, uint64_t phases,
                    float pad) {
  sim::CoreBuilder& b = t.e_builder();
  const Phases p{g, static_cast<int64_t>(t.rows()), phases};
  split_phases(t, p, images);
  const Window& w = g.w;
  const int64_t wp = p.wp();
  for (int64_t ky = 0; ky < w.kh; ++ky) {
    int64_t oy0 = 0, oy1 = 0;
    valid_window_rows(w, ky, g.OH, g.H, &oy0, &oy1);
    if (oy1 <= oy0) continue;
    const int64_t qy = floor_div(ky - w.pad_top, w.sh), py = ky - w.pad_top - qy * w.sh;
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      int64_t ox0 = 0, ox1 = 0, x0 = 0;
      if (!valid_window_columns(w, kx, g.OW, g.W, &ox0, &ox1, &x0)) continue;
      const int64_t qx = floor_div(kx - w.pad_left, w.sw), px = kx - w.pad_left - qx * w.sw;
      const int64_t windows = (oy1 - 1 - oy0) * g.OW + ox1 - ox0;
      for (int64_t r = 0; r < p.rows; ++r) {
        const int64_t pixel = (r * p.hp(py) + oy0 + qy) * wp + ox0 + qx;
        const int64_t window = (r * g.OH + oy0) * g.OW + ox0;
        t.chain(b.unary(
            Vector::COPY,
            f32_block(
                patches + static_cast<uint64_t>(window * g.patch + (ky * w.kw + kx) * g.C) * 4,
                windows, g.C, g.patch),
            f32_block(p.phase(py, px) + static_cast<uint64_t>(pixel * g.C) * 4, windows, g.C,
                      g.C)));
      }
    }
  }
  zero_wrapped(t, g, patches, pad);
}

}  // namespace

bool phase_split(const Im2col& g) { return !g.flat && g.W % g.w.sw == 0 && g.OW == g.W / g.w.sw; }

int64_t phase_elements(const Im2col& g) { return phase_split(g) ? 2 * g.image_elements() : 0; }

int64_t patch_scratch_elements(const Im2col& g) {
  return g.builds_patches() ? g.patch_elements() + phase_elements(g) : 0;
}

void build_patches(Tile& t, const Im2col& g, uint64_t images, uint64_t patches, uint64_t phases,
                   float pad) {
  if (phases != 0 && phase_split(g)) {
    phased_patches(t, g, images, patches, phases, pad);
    return;
  }
  sim::CoreBuilder& b = t.e_builder();
  if (!g.flat) {
    t.chain(b.fill(block(patches, t.rows(), static_cast<uint32_t>(g.OH * g.OW * g.patch), isa::F32),
                   pad));
  }
  for_each_window_run(g, images, patches, t.rows(),
                      [&](const isa::Block& pixels, const isa::Block& windows) {
                        t.chain(b.unary(Vector::COPY, windows, pixels));
                      });
  if (g.flat) zero_wrapped(t, g, patches, pad);
}

}  // namespace tpusim::runtime::tpusim_backend
