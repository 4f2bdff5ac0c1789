// The TFRecord reader on any bytes: plain, GZIP and ZLIB (the first byte chooses, and whether
// corrupt records are skipped), read to the end or the first error.
#include "runtime/data/tfrecord.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using tpusim::runtime::data::Compression;
  tpusim::runtime::data::ReaderOptions options;
  const Compression kinds[] = {Compression::kNone, Compression::kGzip, Compression::kZlib};
  options.compression = kinds[data[0] % 3];
  options.skip_corrupt = (data[0] & 4) != 0;
  options.map_file = (data[0] & 8) != 0;
  options.buffer_bytes = 4096;
  const std::string path = tpusim::fuzz::write_input(data + 1, size - 1, "records");
  auto reader = tpusim::runtime::data::TFRecordReader::open(path, options);
  if (!reader.ok()) return 0;
  std::string record;
  for (int i = 0; i < 100000; ++i) {
    auto got = (*reader)->next(&record);
    if (!got.ok() || !*got) break;
  }
  return 0;
}
