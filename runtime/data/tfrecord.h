#pragma once
// TFRecord files, wire-compatible with TensorFlow: each record is
//   uint64 length (little endian) | uint32 masked_crc32c(length) | data | uint32
//   masked_crc32c(data)
// and a GZIP or ZLIB file compresses the whole framed stream. The reader finds the compression
// itself (GZIP by its magic bytes; ZLIB by a valid zlib header where the bytes are not a valid
// TFRecord header) unless told. Corrupt or truncated input is an error naming the file and the
// byte offset of the bad record (in the decompressed stream for compressed files); with
// skip_corrupt, records whose data fails its checksum are skipped and counted, and after a
// corrupt length the reader scans forward to the next valid record header, over at most
// max_resync_bytes (a region of garbage, or a gzip bomb inflating to gigabytes of zeros, fails
// the read naming where the scan began instead of being scanned to its end). A length whose own
// checksum holds is trusted only where it lands on the next record or the stream's end: a wrong
// length (its checksum computed over the wrong value) would otherwise hide the records it covers,
// so the reader scans from its header instead.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::runtime::data {

enum class Compression { kAuto, kNone, kGzip, kZlib };
const char* compression_name(Compression c);
// "auto" | "none" | "gzip" | "zlib".
absl::StatusOr<Compression> parse_compression(const std::string& name);

struct ReaderOptions {
  Compression compression = Compression::kAuto;
  bool skip_corrupt = false;
  // With skip_corrupt: the most bytes one scan for the next valid header passes over. A corrupt
  // length in front of a record larger than this ends the read there, with an error.
  uint64_t max_resync_bytes = uint64_t{64} << 20;
  size_t buffer_bytes = 256 << 10;
  // Map an uncompressed regular file instead of reading it through a buffer (no kernel copy).
  // A mapped file must not shrink while it is read (the OS would raise SIGBUS); turn this off
  // for files another process may truncate.
  bool map_file = true;
  // > 0: a record longer than this is refused before it is read, as no record of the pipeline
  // reading the file (a pipeline that knows its records' size says so, and why:
  // max_record_what, "an MNIST-family record (a 28x28 image of bytes and its label)").
  uint64_t max_record_bytes = 0;
  std::string max_record_what{};
  // Dataset::tfrecords and interleave_tfrecords: each element also carries where its record
  // came from (kRecordFile, kRecordPlace in dataset.h), which map() takes off before its
  // function runs and names in the function's error ("FILE, record N at byte offset M").
  bool name_records = false;
};

class ByteSource;

class TFRecordReader {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> open(const std::string& path,
                                                              ReaderOptions options = {});
  ~TFRecordReader();

  // The next record into `record`; false at the clean end of the file.
  absl::StatusOr<bool> next(std::string* record);

  const std::string& path() const { return path_; }
  Compression compression() const { return compression_; }
  uint64_t offset() const { return offset_; }    // of the next record, in the (decompressed) stream
  uint64_t records() const { return records_; }  // read so far
  uint64_t skipped() const { return skipped_; }  // corrupt records skipped

 private:
  TFRecordReader(std::string path, ReaderOptions options);
  // Makes `n` bytes available at buffer_[pos_]; false when the stream ends first.
  absl::StatusOr<bool> fill(size_t n);
  absl::Status corrupt(const std::string& what) const;
  // skip_corrupt, at a header that fails its checksum: scans forward a byte at a time to the
  // next header that checks out (true), or to the stream's end (false), or refuses a scan past
  // max_resync_bytes.
  absl::StatusOr<bool> resync();
  // OK, or ResourceExhausted when a record of `length` bytes would not fit the memory budget.
  absl::Status check_record_memory(uint64_t length) const;
  // skip_corrupt, at a record whose data fails its checksum, or (`truncated`) which the stream
  // ends inside: skipped by its length where that lands on a record or the stream's end; else
  // the length is what is wrong (its checksum holds for a wrong value too), and a scan from its
  // header finds the records it would have hidden. False when the stream ends.
  absl::StatusOr<bool> skip_bad_record(uint64_t length, bool truncated);
  // Whether `n` bytes on from here the stream ends or a header that checks out starts.
  absl::StatusOr<bool> lands_on_record(uint64_t n);
  // skip_corrupt, at a record the stream ends inside: counts it skipped and passes the rest.
  void skip_to_end();
  // A mapped file: faults in its pages up to `upto` and a window past the reader, and lets go of
  // those more than a window behind it.
  void slide_mapping(size_t upto);

  std::string path_;
  ReaderOptions options_;
  Compression compression_ = Compression::kNone;
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  void* mapping_ = nullptr;  // the whole file, when mapped; buffer_ stays empty
  size_t mapping_bytes_ = 0;
  size_t populated_ = 0;        // mapped pages faulted in below this byte
  size_t released_ = 0;         // and let go below this one
  const char* base_ = nullptr;  // buffer_.data() or mapping_
  size_t pos_ = 0;              // unread bytes are base_[pos_, end_)
  size_t end_ = 0;
  uint64_t offset_ = 0;
  uint64_t records_ = 0;
  uint64_t skipped_ = 0;
};

class TFRecordWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> open(
      const std::string& path, Compression compression = Compression::kNone);
  ~TFRecordWriter();
  absl::Status write(const std::string& record);
  // Finishes the compressed stream and closes the file; the destructor closes too but cannot
  // report a failure.
  absl::Status close();

 private:
  struct Impl;
  explicit TFRecordWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Frames one record (header, data, footer) as TFRecord bytes.
std::string frame_record(const std::string& data);

}  // namespace tpusim::runtime::data
