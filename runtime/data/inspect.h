#pragma once
// What a TFRecord file holds: record count and sizes, and, where the records are tf.Example,
// the features of the first one (name, kind, number of values). `tpusim data inspect` prints it.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

struct FeatureSummary {
  std::string name;
  std::string kind;  // "bytes" | "float" | "int64" | "empty"
  int values = 0;
  std::string preview;  // the first few values, or the byte length of each bytes value
};

struct TFRecordSummary {
  std::string path;
  Compression compression = Compression::kNone;
  uint64_t records = 0;
  uint64_t skipped = 0;       // corrupt records, with skip_corrupt
  uint64_t record_bytes = 0;  // data bytes, framing excluded
  uint64_t min_record_bytes = 0, max_record_bytes = 0;
  bool examples = false;                      // every record parses as a tf.Example
  std::vector<FeatureSummary> first_example;  // sorted by name
};

absl::StatusOr<TFRecordSummary> summarize_tfrecord(const std::string& path,
                                                   ReaderOptions options = {});

}  // namespace tpusim::runtime::data
