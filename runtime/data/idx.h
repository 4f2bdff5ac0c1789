#pragma once
// IDX files (the MNIST / Fashion-MNIST format), raw or gzip-compressed: a big-endian header
// (two zero bytes, a type code, the number of dimensions, one uint32 size per dimension) then the
// values, row-major. Only unsigned bytes (type 0x08), the type every MNIST-family file uses.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::runtime::data {

struct IdxArray {
  std::vector<uint32_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> values;
  // Elements per entry of the first dimension (28 * 28 for an image file).
  size_t row_size() const;
};

// Reads the whole file (gzip or not: zlib tells them apart). Errors name the file and, for a
// bad header or a short file, the byte offset.
absl::StatusOr<IdxArray> read_idx(const std::string& path);

}  // namespace tpusim::runtime::data
