#pragma once
// MNIST-family IDX pairs (images + labels) to TFRecord files of tf.Example, with the feature
// names of TensorFlow's own converter (tensorflow/models, convert_to_records.py):
//   height, width, depth: int64;  label: int64;  image_raw: bytes (height*width*depth uint8)
// so the files also read in TensorFlow with the usual feature spec.

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

struct IdxConversion {
  std::string images;  // IDX, rank 3 (count, height, width) or 4 (..., depth)
  std::string labels;  // IDX, rank 1 (count)
  std::string output;
  Compression compression = Compression::kNone;
  uint64_t limit = 0;  // convert the first `limit` examples; 0: all
};

struct IdxConversionResult {
  uint64_t examples = 0;
  uint32_t height = 0, width = 0, depth = 0;
};

absl::StatusOr<IdxConversionResult> convert_idx_to_tfrecord(const IdxConversion& job);

}  // namespace tpusim::runtime::data
