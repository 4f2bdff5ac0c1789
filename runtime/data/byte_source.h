#pragma once
// Bytes from a TFRecord file, raw or through zlib's inflate (gzip members one after another, or a
// zlib stream): what TFRecordReader reads when it does not map the file.

#include <cstdio>
#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to `n` bytes into `out`; 0 at the end. Errors name the file.
  virtual absl::StatusOr<size_t> read(char* out, size_t n) = 0;
};

// The bytes of an open file (closed with the source); errors name `path`.
std::unique_ptr<ByteSource> file_source(std::FILE* f, std::string path);
// `raw`'s bytes inflated as `c` (kGzip or kZlib) frames them; errors name `path` and how many
// bytes were decompressed before them, over every gzip member.
std::unique_ptr<ByteSource> inflate_source(std::unique_ptr<ByteSource> raw, std::string path,
                                           Compression c);

}  // namespace tpusim::runtime::data
