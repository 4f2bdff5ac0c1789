#pragma once
// im2col geometry and the vector-unit code that builds a tile of whole images' patches in VMEM
// (and sums patches back into images), shared by the extract_patches / patches_to_image
// fragments and the fused convolutions (conv_fusion.cc).

#include <cstdint>
#include <functional>

#include "runtime/backend/tpusim/emitter.h"
#include "runtime/graph/graph.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::runtime::tpusim_backend {

// How a fused convolution feeds its MXUs (Fusion::feed):
//   kPatches  im2col: the patches built in VMEM by the vector unit (build_patches), one product
//             over [windows, kh x kw x C];
//   kImages   the patches are the images themselves (a 1x1 kernel, stride 1, no padding):
//             window (oy, ox) is pixel (oy, ox)'s C values, so [images x OH x OW, patch] is the
//             images' own layout. XLA lowers such a convolution as a dot over the channels, its
//             operand read where it lies; the MXUs read the images (and an input gradient's
//             products land in the image rows) without patches;
//   kWindows  no patches: one product per kernel offset, its windows read in place as strided
//             views of the images (a grouped matmul, isa.proto), accumulated in the output, as
//             XLA's TPU convolution emitter walks a kernel's window over the activations
//             (conv_windows.h).
enum class ConvFeed { kPatches, kImages, kWindows };

// A convolution's im2col geometry: NHWC images of H x W x C, OH x OW windows of `patch` values.
// In the flat view (stride 1, output rows as wide as the input's) consecutive windows (oy, ox)
// of an image read consecutive pixels, so one kernel offset is one strided block over an image
// (or a band of its rows); when the output is as tall as the input too, consecutive images
// line up as well and one block covers a whole tile.
struct Im2col {
  Window w;
  int64_t H, W, C, OH, OW, patch;
  bool flat;       // one block per kernel offset and image
  bool flat_tile;  // one per kernel offset and tile
  // The feed asked for (`feed`), where the geometry allows it: kImages only for a 1x1 stride-1
  // kernel without padding (`identity`); `windowed` for kWindows.
  bool identity;
  bool windowed;
  Im2col(const Window& window, const Shape& image, const Shape& patches,
         ConvFeed feed = ConvFeed::kPatches)
      : w(window),
        H(image.dim(1)),
        W(image.dim(2)),
        C(image.dim(3)),
        OH(patches.dim(1)),
        OW(patches.dim(2)),
        patch(window.kh * window.kw * image.dim(3)),
        flat(window.sw == 1 && window.sh == 1 && OW == W),
        flat_tile(flat && OH == H),
        identity(feed == ConvFeed::kImages && flat_tile && window.kh == 1 && window.kw == 1 &&
                 window.pad_top == 0 && window.pad_left == 0),
        windowed(feed == ConvFeed::kWindows) {}
  ConvFeed feed() const {
    return identity ? ConvFeed::kImages : windowed ? ConvFeed::kWindows : ConvFeed::kPatches;
  }
  // Whether the fragment builds patches in VMEM.
  bool builds_patches() const { return !identity && !windowed; }
  int64_t image_elements() const { return H * W * C; }        // per image
  int64_t patch_elements() const { return OH * OW * patch; }  // per image
  int64_t pixels() const { return OH * OW; }                  // windows per image
};

// The output columns [ox0, ox1) of a window row at kernel column kx whose input column
// ox * sw + kx - pad_left lies inside an image in_w wide, and x0, the first of those input
// columns; false when there is none.
bool valid_window_columns(const Window& w, int64_t kx, int64_t out_w, int64_t in_w, int64_t* ox0,
                          int64_t* ox1, int64_t* x0);
// The output rows [oy0, oy1) whose window row ky lies inside an image in_h tall.
void valid_window_rows(const Window& w, int64_t ky, int64_t out_h, int64_t in_h, int64_t* oy0,
                       int64_t* oy1);

// In the flat view a copy or add for one kernel offset runs over every window of the tile's
// images at once, so windows that fall outside their image wrap into neighbouring rows or
// images. These fills set those positions of the patches at `patches` (the tile's rows) to `pad`:
// zero, or a max pool's padding value.
void zero_wrapped(Tile& t, const Im2col& g, uint64_t patches, float pad = 0);

// Calls fn(pixels, windows) for each run of windows one instruction covers: `pixels` is the
// run's block of the tile's images (C-wide rows), `windows` its block of the tile's patches (the
// columns of one kernel offset). In the flat view one run per kernel offset and image (from its
// first valid window to its last), or over the whole tile of `count` images (flat_tile);
// otherwise one per offset, image and output row.
void for_each_window_run(const Im2col& g, uint64_t images, uint64_t patches, int64_t count,
                         const std::function<void(const isa::Block&, const isa::Block&)>& fn);

// Whether strided windows can be built from the images' stride phases (phased_patches): the
// output rows as wide as a phase of the input's, W = OW x sw.
bool phase_split(const Im2col& g);
// The VMEM phased_patches needs beside a tile's images and patches, per image (f32 elements):
// the column phases, then the row phases of each; 0 for a geometry phase_split() does not take.
int64_t phase_elements(const Im2col& g);

// The VMEM a fused convolution's tile needs for its patches and their stride phases, per image
// (f32 elements): none when the patches are the images (identity).
int64_t patch_scratch_elements(const Im2col& g);

// The patches of the tile's images (at `images`) built at `patches`, chained on the tile: set to
// `pad` first unless flat, one copy per window run, the wrapped windows set to `pad` after when
// flat (the positions outside the image: zero for a convolution, the padding value for a max
// pool). With `phases` (phase_elements() per image of VMEM, 0: none) and a geometry
// phase_split() takes, as phased_patches builds them; `phases` is not touched otherwise, so a
// caller may always pass where its scratch would hold them.
void build_patches(Tile& t, const Im2col& g, uint64_t images, uint64_t patches, uint64_t phases = 0,
                   float pad = 0);

}  // namespace tpusim::runtime::tpusim_backend
