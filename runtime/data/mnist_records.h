#pragma once
// MNIST-family IDX pairs (images + labels) to sharded TFRecord files of tf.Example
//   {"image_raw": bytes, "label": int64}
// image_raw holds the height*width*depth uint8 pixels, or with `jpeg` a baseline JPEG of the
// image upscaled (bilinear) to jpeg_size x jpeg_size: a flowers-style pipeline whose input_fn
// pays a real decode. Shards as shard_files.h says, examples in file order.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/data/dataset.h"
#include "runtime/data/shard_files.h"
#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

struct IdxConversion {
  std::string images;      // IDX, rank 3 (count, height, width) or 4 (..., depth)
  std::string labels;      // IDX, rank 1 (count)
  std::string output_dir;  // created when missing
  std::string prefix;      // shard names; empty: the images file's name up to its first '-'
  int shards = 1;
  Compression compression = Compression::kNone;
  uint64_t limit = 0;  // convert the first `limit` examples; 0: all
  bool jpeg = false;
  int jpeg_size = 0;  // upscale to this square size before encoding; 0: keep the IDX size
  int jpeg_quality = 90;
  int threads = 0;  // shards written at once; 0: one per core (never more than shards)
};

struct IdxConversionResult {
  uint64_t examples = 0;
  uint32_t height = 0, width = 0, depth = 0;  // of the IDX images
  std::vector<std::string> shard_paths;
  std::vector<uint64_t> shard_examples;
  uint64_t image_bytes = 0;  // total image_raw bytes written
};

absl::StatusOr<IdxConversionResult> convert_idx_to_tfrecord(const IdxConversion& job);

// The input_fn side: a Dataset map function from {"record": bytes} (a record of the shards
// above) to {"image": float [height, width, depth] in [0, 1], "label": int64 scalar}. Raw
// image_raw must hold height*width*depth bytes; a JPEG is decoded (to `depth` channels) and
// resized to height x width when its size differs. Errors name the feature and the problem.
MapFn mnist_parse_fn(int height, int width, int depth, bool jpeg);

}  // namespace tpusim::runtime::data
