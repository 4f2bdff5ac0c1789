#include "runtime/backend/tpusim/conv_windows.h"

#include <algorithm>

#include "common/align.h"
#include "sim/memory/block.h"

namespace tpusim::runtime::tpusim_backend {

using sim::block;

namespace {

// One side of a kernel offset's product, in f32 elements: window (r, oy, ox) at `ox0 + i` is at
// base + r * image + oy * group + i * row, each row `width` elements wide.
struct Side {
  uint64_t base = 0;
  int64_t image = 0, group = 0, row = 0, first = 0;  // first: window (0, 0, ox0)'s offset
  int64_t width = 0;
  uint64_t at(int64_t r, int64_t oy) const {
    return base + static_cast<uint64_t>(first + r * image + oy * group) * 4;
  }
};

isa::Block with_rows(isa::Block b, uint32_t rows) {
  b.set_rows(rows);
  return b;
}

// The windows of image r whose output rows are [oy0, oy1).
struct Segment {
  int64_t r, oy0, oy1;
};

// One kernel offset's product: its two sides (the lhs the MXUs stream, the out they write), the
// windows valid at it, and the rows an MXU part owns: window (r, oy) is owned by the part whose
// range holds r * owner_image + oy * owner_step + owner_first.
struct Offset {
  Side lhs, out;
  int64_t oy0 = 0, oy1 = 0, ox0 = 0, ox1 = 0;
  int64_t owner_image = 0, owner_step = 1, owner_first = 0;
};

// The segments of `o` whose owner index lies in [g0, g1), images joined where the next one's
// first group follows the last one's on both sides.
std::vector<Segment> owned_segments(const Offset& o, int64_t n, int64_t g0, int64_t g1) {
  std::vector<Segment> segments;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t at = r * o.owner_image + o.owner_first;
    const int64_t a = std::max(o.oy0, ceil_div(g0 - at, o.owner_step));
    const int64_t b = std::min(o.oy1, ceil_div(g1 - at, o.owner_step));
    if (b <= a) continue;
    if (!segments.empty()) {
      Segment& last = segments.back();
      if (o.lhs.at(last.r, last.oy1) == o.lhs.at(r, a) &&
          o.out.at(last.r, last.oy1) == o.out.at(r, a)) {
        // Image r's groups continue image last.r's: one view, its groups counted past the end.
        last.oy1 += b - a;
        continue;
      }
    }
    segments.push_back({r, a, b});
  }
  return segments;
}

// Emits offset `o`'s products: its depth (lhs.width) in chunks of R, its columns (out.width) in
// tiles of C, the owners split into parts between the MXUs; `weights(k0, c0)` the kernel's
// block for depth rows k0.. and columns c0.. (`rows` x `cols`).
uint32_t offset_products(
    const config::CoreSpec& core, sim::CoreBuilder& b, const Offset& o, int64_t n, int64_t owners,
    isa::Precision precision, std::vector<uint32_t>& next_slot, const WindowHooks& hooks,
    const std::function<isa::Block(int64_t, int64_t, uint32_t, uint32_t)>& weights) {
  const uint32_t R = core.mxu_rows, C = core.mxu_cols;
  const auto col_tiles = static_cast<uint32_t>(pieces_covering(o.out.width, C));
  const auto parts = static_cast<uint32_t>(
      std::max<int64_t>(1, std::min<int64_t>(core.mxu_count / col_tiles, owners)));
  const auto rows = static_cast<uint32_t>(o.ox1 - o.ox0);
  // Groups whose rows follow on from the last group's on both sides are one block.
  const bool flat = o.lhs.group == rows * o.lhs.row && o.out.group == rows * o.out.row;
  uint32_t matmuls = 0;
  for (int64_t k0 = 0; k0 < o.lhs.width; k0 += R) {
    const auto depth = static_cast<uint32_t>(std::min<int64_t>(R, o.lhs.width - k0));
    for (uint32_t part = 0; part < parts; ++part) {
      const std::vector<Segment> segments =
          owned_segments(o, n, part * owners / parts, (part + 1) * owners / parts);
      if (segments.empty()) continue;
      for (uint32_t nn = 0; nn < col_tiles; ++nn) {
        const int64_t c0 = int64_t{nn} * C;
        const auto width = static_cast<uint32_t>(std::min<int64_t>(C, o.out.width - c0));
        const uint32_t mxu = (part * col_tiles + nn) % core.mxu_count;
        const uint32_t slot = next_slot[mxu];
        next_slot[mxu] ^= 1;
        sim::InstrRef load = b.load_weights(mxu, slot, weights(k0, c0, depth, width));
        hooks.on_load(load);
        for (const Segment& s : segments) {
          const isa::Block lhs = block(o.lhs.at(s.r, s.oy0) + static_cast<uint64_t>(k0) * 4, rows,
                                       depth, isa::F32, static_cast<uint64_t>(o.lhs.row) * 4);
          const isa::Block out = block(o.out.at(s.r, s.oy0) + static_cast<uint64_t>(c0) * 4, rows,
                                       width, isa::F32, static_cast<uint64_t>(o.out.row) * 4);
          const auto groups = static_cast<uint32_t>(s.oy1 - s.oy0);
          sim::InstrRef mm =
              flat ? b.matmul(mxu, slot, with_rows(lhs, rows * groups),
                              with_rows(out, rows * groups), true, precision)
                   : b.grouped_matmul(mxu, slot, lhs, out, groups,
                                      static_cast<uint64_t>(o.lhs.group) * 4,
                                      static_cast<uint64_t>(o.out.group) * 4, true, precision);
          hooks.on_matmul(mm);
          ++matmuls;
        }
      }
    }
  }
  return matmuls;
}

}  // namespace

bool windows_fill_mxus(const config::CoreSpec& core, const Im2col& g, bool input_grad) {
  const int64_t offsets = g.w.kh * g.w.kw;
  const int64_t chunk = input_grad ? core.mxu_cols : core.mxu_rows;
  return offsets == 1 || g.C % chunk == 0;
}

namespace {

// Offset (ky, kx)'s valid windows; false when none.
bool valid_windows(const Im2col& g, int64_t ky, int64_t kx, Offset* o) {
  valid_window_rows(g.w, ky, g.OH, g.H, &o->oy0, &o->oy1);
  int64_t x0 = 0;
  return o->oy1 > o->oy0 && valid_window_columns(g.w, kx, g.OW, g.W, &o->ox0, &o->ox1, &x0);
}

// The image side of offset (ky, kx): the pixels its windows read (from ox0 on).
Side image_side(const WindowTile& t, int64_t ky, int64_t kx, int64_t ox0) {
  const Im2col& g = t.g;
  const Window& w = g.w;
  return Side{t.images,
              g.H * g.W * g.C,
              w.sh * g.W * g.C,
              w.sw * g.C,
              ((ky - w.pad_top) * g.W + ox0 * w.sw + kx - w.pad_left) * g.C,
              g.C};
}

// The pixel side: the windows themselves, [n, OH, OW, F] (from ox0 on).
Side pixel_side(const WindowTile& t, int64_t ox0) {
  const Im2col& g = t.g;
  return Side{t.pixels,  g.OH * g.OW * t.filters, g.OW * t.filters,
              t.filters, ox0 * t.filters,         t.filters};
}

// fn(ky, kx, o) for every kernel offset with a valid window, `o` holding its windows; the sum of
// what fn returns.
uint32_t each_offset(const Im2col& g,
                     const std::function<uint32_t(int64_t, int64_t, Offset&)>& fn) {
  uint32_t matmuls = 0;
  for (int64_t ky = 0; ky < g.w.kh; ++ky) {
    for (int64_t kx = 0; kx < g.w.kw; ++kx) {
      Offset o;
      if (valid_windows(g, ky, kx, &o)) matmuls += fn(ky, kx, o);
    }
  }
  return matmuls;
}

}  // namespace

uint32_t forward_window_products(const config::CoreSpec& core, sim::CoreBuilder& b,
                                 const WindowTile& tile, isa::Precision precision,
                                 std::vector<uint32_t>& next_slot, const WindowHooks& hooks) {
  const Im2col& g = tile.g;
  return each_offset(g, [&](int64_t ky, int64_t kx, Offset& o) {
    o.lhs = image_side(tile, ky, kx, o.ox0);
    o.out = pixel_side(tile, o.ox0);
    o.owner_image = g.OH;  // the output rows
    const int64_t first_row = (ky * g.w.kw + kx) * g.C;
    return offset_products(
        core, b, o, tile.n, tile.n * g.OH, precision, next_slot, hooks,
        [&](int64_t k0, int64_t c0, uint32_t rows, uint32_t cols) {
          return block(
              tile.kernel + static_cast<uint64_t>((first_row + k0) * tile.filters + c0) * 4, rows,
              cols, isa::F32, uint64_t{tile.filters} * 4);
        });
  });
}

uint32_t input_grad_window_products(const config::CoreSpec& core, sim::CoreBuilder& b,
                                    const WindowTile& tile, isa::Precision precision,
                                    std::vector<uint32_t>& next_slot, const WindowHooks& hooks) {
  const Im2col& g = tile.g;
  return each_offset(g, [&](int64_t ky, int64_t kx, Offset& o) {
    o.lhs = pixel_side(tile, o.ox0);
    o.out = image_side(tile, ky, kx, o.ox0);
    // The image rows the windows add into: window row oy adds into row oy sh + ky - pad_top.
    o.owner_image = g.H;
    o.owner_step = g.w.sh;
    o.owner_first = ky - g.w.pad_top;
    const int64_t first_col = (ky * g.w.kw + kx) * g.C;
    return offset_products(
        core, b, o, tile.n, tile.n * g.H, precision, next_slot, hooks,
        [&](int64_t k0, int64_t c0, uint32_t rows, uint32_t cols) {
          return block(tile.kernel + static_cast<uint64_t>(k0 * g.patch + first_col + c0) * 4, rows,
                       cols, isa::F32, static_cast<uint64_t>(g.patch) * 4);
        });
  });
}

}  // namespace tpusim::runtime::tpusim_backend
