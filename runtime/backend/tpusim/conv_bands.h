#pragma once
// Bands of image rows: how a fragment whose image and windows do not fit a VMEM tile slot works
// on a band of rows of every image at a time (im2col and col2im, lower_conv.cc; the fused
// convolutions, conv_fusion.cc), as XLA's convolution emitter tiles an image by rows of its
// output with the input rows those windows reach (a halo of kh - sh rows) beside them.

#include <cstdint>
#include <functional>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/tpusim/emitter.h"
#include "runtime/backend/tpusim/im2col.h"

namespace tpusim::runtime::tpusim_backend {

// A band of rows of every image: window rows [oy0, oy0 + g.OH) and the image rows
// [y0, y0 + g.H) they read, with `g` the geometry of im2col over the band as an image of its own
// (the window's top padding shifted so that its rows line up). One band of all the rows is the
// whole image. `carried`: image rows at the band's top that an earlier band added into too.
struct Band {
  Im2col g;
  int64_t oy0, y0;
  int64_t carried = 0;
};

// How a fragment too big for a VMEM tile is cut into bands.
enum class Cut {
  kWindowRows,  // each band reads the image rows its windows need (im2col, the convolutions)
  kImageRows,   // each band adds the windows that reach its image rows (col2im, input gradients)
  // col2im where one image row and its windows do not fit: bands of window rows, each adding
  // into the image rows from where the previous band's end (so that every row is written, those
  // no window reaches with zeros) to where its windows reach (the last band to the image's end),
  // the rows the previous band added into too carried: loaded and added onto.
  kCarriedWindowRows,
};

// The widths (f32 elements per image) of the blocks a tile of band `b` takes in its slot, as the
// fragment lays them out (Emitter::tile_bytes).
using BandWidths = std::function<std::vector<uint64_t>(const Band& b)>;

// The bands a fragment works in: the whole image when one image's blocks fit a tile slot of
// `slot_bytes`, else bands as tall as fit, cut as `cut` says; an error naming the bytes one row
// needs when not even that fits.
absl::StatusOr<std::vector<Band>> image_bands(uint64_t slot_bytes, const Im2col& g, Cut cut,
                                              const BandWidths& widths);

// For a band of image rows (Cut::kImageRows), the band of the same windows with all the image
// rows they read (what Cut::kWindowRows makes of them): where a fragment that needs whole
// windows (a max pool's gradient counts each window's maxima) builds them.
Band whole_windows(const Im2col& g, const Band& rows);

// The band's operand (or output) in an HBM tensor of whole images `cols` wide: rows of
// `band_elements` from `first_element` of each image.
TileOperand band_rows(uint64_t hbm, int64_t first_element, int64_t band_elements, int64_t cols);

}  // namespace tpusim::runtime::tpusim_backend
