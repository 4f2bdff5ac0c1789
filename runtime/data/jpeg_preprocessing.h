#pragma once
// The flowers-style (ImageNet-style) preprocessing of JPEG tf.Example records
//   {"image_raw": JPEG bytes, "label": int64}
// (the JPEG shards of mnist_records.h), as a Dataset map function:
//   train: decode, resize (bilinear) to resize_size(S) square, a random S x S crop, a random
//          left-right flip;
//   eval:  decode, resize to resize_size(S), the central S x S crop.
// The output is {"image": float [S, S, channels] in [0, 1], "label": int64 scalar}.
//
// The training crop and flip draw from a generator seeded with `seed` and the element's
// "index" (Dataset::enumerate before the map), so a parallel map gives the same images as a
// sequential one, and a record is cropped differently on each pass of a repeat().

#include <cstdint>

#include "runtime/data/dataset.h"

namespace tpusim::runtime::data {

struct JpegPreprocessing {
  int image_size = 224;  // S: the side of the square image the model sees
  int channels = 1;      // decoded to 1 (grey) or 3 (RGB) channels
  bool training = true;
  uint64_t seed = 0;  // training only
  int classes = 10;   // labels in [0, classes): the model's outputs
};

// The side the image is resized to before cropping: S * 8 / 7 rounded (256 for 224), the
// ratio of ImageNet preprocessing.
int resize_size(int image_size);

// Errors name the record's feature and the problem; training without an "index" component
// says to enumerate the dataset first.
MapFn jpeg_preprocess_fn(const JpegPreprocessing& options);

}  // namespace tpusim::runtime::data
