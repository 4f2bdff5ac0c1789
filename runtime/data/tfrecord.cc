#include "runtime/data/tfrecord.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/host_budget.h"
#include "common/input_file.h"
#include "common/named_values.h"
#include "common/strings.h"
#include "runtime/data/byte_source.h"
#include "runtime/data/crc32c.h"

namespace tpusim::runtime::data {

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kAuto:
      return "auto";
    case Compression::kNone:
      return "none";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZlib:
      return "zlib";
  }
  return "?";
}

absl::StatusOr<Compression> parse_compression(const std::string& name) {
  // The flags' words, and TensorFlow's compression_type words ("", "GZIP", "ZLIB").
  static constexpr NamedValues<Compression, 7> kWords{{{{Compression::kAuto, "auto"},
                                                        {Compression::kNone, "none"},
                                                        {Compression::kNone, ""},
                                                        {Compression::kGzip, "gzip"},
                                                        {Compression::kGzip, "GZIP"},
                                                        {Compression::kZlib, "zlib"},
                                                        {Compression::kZlib, "ZLIB"}}}};
  if (auto compression = kWords.parse(name)) return *compression;
  return absl::InvalidArgumentError(
      str_cat("unknown compression '", name, "' (auto, none, gzip or zlib)"));
}

namespace {

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint32_t read_le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void put_le(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Records above 2 GiB cannot be protobufs and no TensorFlow writer makes them.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 31;

bool valid_header(const char* p) { return masked_crc32c(p, 8) == read_le32(p + 8); }

}  // namespace

std::string frame_record(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(&out, data.size(), 8);
  put_le(&out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(&out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

TFRecordReader::TFRecordReader(std::string path, ReaderOptions options)
    : path_(std::move(path)), options_(options) {}

TFRecordReader::~TFRecordReader() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::open(const std::string& path,
                                                                     ReaderOptions options) {
  if (auto s = check_regular_file(path, "TFRecord file"); !s.ok()) return s;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return absl::NotFoundError(
        str_cat("cannot open TFRecord file ", path, ": ", std::strerror(errno)));
  std::unique_ptr<TFRecordReader> r(new TFRecordReader(path, options));
  Compression c = options.compression;
  if (c == Compression::kAuto) {
    char head[12];
    const size_t got = std::fread(head, 1, sizeof head, f);
    std::rewind(f);
    const auto b0 = static_cast<uint8_t>(head[0]), b1 = static_cast<uint8_t>(head[1]);
    if (got >= 2 && b0 == 0x1f && b1 == 0x8b) {
      c = Compression::kGzip;
    } else if (got == 12 && valid_header(head)) {
      c = Compression::kNone;
    } else if (got >= 2 && (b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0) {
      c = Compression::kZlib;
    } else {
      c = Compression::kNone;  // an empty or corrupt file; reading says which
    }
  }
  r->compression_ = c;
  if (c == Compression::kNone && options.map_file) {
    // Map the file: the records are read in place, with no copy from the kernel.
    struct stat st {};
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* m =
          mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fileno(f), 0);
      if (m != MAP_FAILED) {
        madvise(m, static_cast<size_t>(st.st_size), MADV_SEQUENTIAL);
        std::fclose(f);
        r->mapping_ = m;
        r->mapping_bytes_ = static_cast<size_t>(st.st_size);
        r->base_ = static_cast<const char*>(m);
        r->end_ = r->mapping_bytes_;
        r->slide_mapping(0);
        return r;
      }
    }
  }
  std::unique_ptr<ByteSource> raw = file_source(f, path);
  if (c == Compression::kNone) {
    r->source_ = std::move(raw);
  } else {
    r->source_ = inflate_source(std::move(raw), path, c);
  }
  return r;
}

// A mapped file's pages are faulted in and let go in windows of this many bytes.
constexpr size_t kMapWindow = size_t{32} << 20;

void TFRecordReader::slide_mapping(size_t upto) {
  // The file's pages are faulted in a window ahead of the reader (MADV_POPULATE_READ, where the
  // kernel has it: the speed MAP_POPULATE gave without mapping the whole file at once) and let go
  // a window behind it, so a mapped file holds about two windows resident whatever its size.
  char* const base = static_cast<char*>(mapping_);
  if (pos_ >= released_ + 2 * kMapWindow) {
    const size_t behind = (pos_ - kMapWindow) & ~(kMapWindow - 1);
    madvise(base + released_, behind - released_, MADV_DONTNEED);
    released_ = behind;
  }
  const size_t wanted = std::min(mapping_bytes_, std::max(upto, pos_ + kMapWindow));
  if (wanted > populated_) {
    const size_t to = std::min(mapping_bytes_, std::max(wanted, populated_ + kMapWindow));
    const size_t from = populated_ & ~(size_t{4095});
    madvise(base + from, to - from, MADV_POPULATE_READ);
    populated_ = to;
  }
}

absl::StatusOr<bool> TFRecordReader::fill(size_t n) {
  if (mapping_ != nullptr) {
    // The whole file is there: only its window moves.
    if (pos_ + n > populated_ || pos_ >= released_ + 2 * kMapWindow) slide_mapping(pos_ + n);
    return end_ - pos_ >= n;
  }
  if (end_ - pos_ >= n) return true;
  // Move the unread tail (less than one record) to the front, grow only for a record larger
  // than the buffer, and read straight into the free space: no zero-filling, no second copy.
  if (pos_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  if (buffer_.size() < options_.buffer_bytes) buffer_.resize(options_.buffer_bytes);
  base_ = buffer_.data();
  while (end_ < n) {
    // Grow as the data arrives, doubling up to `n`: a header promising 2 GB in a short
    // (or compressed) file holds no more memory than the data there is.
    if (end_ == buffer_.size())
      buffer_.resize(std::min(n, std::max<size_t>(2 * buffer_.size(), 4096)));
    auto got = source_->read(buffer_.data() + end_, buffer_.size() - end_);
    if (!got.ok()) return got.status();
    if (*got == 0) return false;
    end_ += *got;
  }
  base_ = buffer_.data();
  return true;
}

absl::Status TFRecordReader::corrupt(const std::string& what) const {
  return absl::DataLossError(
      str_cat(path_, ": corrupt record at byte offset ", offset_,
              compression_ == Compression::kNone ? "" : " of the decompressed stream", ": ", what));
}

void TFRecordReader::skip_to_end() {
  ++skipped_;
  offset_ += end_ - pos_;
  pos_ = end_;
}

absl::Status TFRecordReader::check_record_memory(uint64_t length) const {
  // The record is held whole: read into the buffer (unless the file is mapped) and copied out.
  // One within the reader's buffer asks for nothing the reader does not hold already.
  if (length <= options_.buffer_bytes) return absl::OkStatus();
  const uint64_t held = length * (mapping_ != nullptr ? 1 : 2);
  return check_host_memory(
      str_cat(path_, ": the record at byte ", offset_, " (", length, " bytes)"), held);
}

absl::StatusOr<bool> TFRecordReader::skip_bad_record(uint64_t length, bool truncated) {
  if (!truncated) {
    auto lands = lands_on_record(16 + length);
    if (!lands.ok()) return lands.status();
    if (*lands) {
      ++skipped_;
      pos_ += 16 + length;
      offset_ += 16 + length;
      return true;
    }
  }
  return resync();
}

absl::StatusOr<bool> TFRecordReader::lands_on_record(uint64_t n) {
  auto more = fill(n + 12);
  if (!more.ok()) return more.status();
  if (*more) return valid_header(base_ + pos_ + n);
  return static_cast<uint64_t>(end_ - pos_) == n;
}

absl::StatusOr<bool> TFRecordReader::resync() {
  ++skipped_;
  const uint64_t scan_from = offset_;
  for (;;) {
    ++pos_;
    ++offset_;
    if (offset_ - scan_from > options_.max_resync_bytes) {
      return absl::DataLossError(
          str_cat(path_, ": no valid record header in the ", options_.max_resync_bytes,
                  " bytes after the corrupt one at byte offset ", scan_from,
                  compression_ == Compression::kNone ? "" : " of the decompressed stream",
                  " (skip_corrupt scans at most max_resync_bytes; ", records_, " records read, ",
                  skipped_, " skipped)"));
    }
    auto more = fill(12);
    if (!more.ok()) return more.status();
    if (!*more) {
      offset_ += end_ - pos_;
      pos_ = end_;
      return false;
    }
    if (valid_header(base_ + pos_)) return true;
  }
}

absl::StatusOr<bool> TFRecordReader::next(std::string* record) {
  for (;;) {
    auto have = fill(12);
    if (!have.ok()) return have.status();
    if (!*have) {
      if (end_ == pos_) return false;  // clean end
      if (!options_.skip_corrupt)
        return corrupt(str_cat("truncated header: ", end_ - pos_, " bytes of 12"));
      skip_to_end();
      return false;
    }
    const char* header = base_ + pos_;
    const uint64_t length = read_le64(header);
    if (!valid_header(header)) {
      if (!options_.skip_corrupt) {
        return corrupt(
            fmt::format("the length field fails its checksum (stored {:#010x}, computed {:#010x})",
                        read_le32(header + 8), masked_crc32c(header, 8)));
      }
      auto found = resync();
      if (!found.ok()) return found.status();
      if (!*found) return false;
      continue;
    }
    if (length > kMaxRecordBytes) {
      // A header that checks out but promises more than any record holds: refuse rather than
      // allocate it.
      if (!options_.skip_corrupt) {
        return corrupt(str_cat("the header promises ", length, " bytes of data, more than the ",
                               kMaxRecordBytes, " a record may hold"));
      }
      ++skipped_;
      ++pos_;
      ++offset_;
      continue;
    }
    if (options_.max_record_bytes > 0 && length > options_.max_record_bytes) {
      return corrupt(str_cat("a record of ", length, " bytes, where ", options_.max_record_what,
                             " is at most ", options_.max_record_bytes));
    }
    if (auto s = check_record_memory(length); !s.ok()) return s;
    auto body = fill(12 + length + 4);
    if (!body.ok()) return body.status();
    if (!*body) {
      if (!options_.skip_corrupt) {
        const uint64_t after_header = end_ - pos_ - std::min<size_t>(12, end_ - pos_);
        if (after_header >= length) {  // the data is whole; its checksum is what is cut
          return corrupt(str_cat("truncated: the record's ", length,
                                 " bytes of data are whole but the file ends ",
                                 after_header - length, " bytes into its 4-byte data checksum"));
        }
        return corrupt(str_cat("truncated: the header promises ", length,
                               " bytes of data but the file ends after ", after_header));
      }
      auto more = skip_bad_record(length, /*truncated=*/true);
      if (!more.ok()) return more.status();
      if (!*more) return false;
      continue;
    }
    const char* data = base_ + pos_ + 12;
    const uint32_t stored = read_le32(data + length);
    const uint32_t computed = masked_crc32c(data, length);
    if (stored != computed) {
      if (!options_.skip_corrupt) {
        return corrupt(fmt::format(
            "the data ({} bytes) fails its checksum (stored {:#010x}, computed {:#010x})", length,
            stored, computed));
      }
      auto more = skip_bad_record(length, /*truncated=*/false);
      if (!more.ok()) return more.status();
      if (!*more) return false;
      continue;
    }
    record->assign(data, length);
    pos_ += 16 + length;
    offset_ += 16 + length;
    ++records_;
    return true;
  }
}

struct TFRecordWriter::Impl {
  std::string path;
  Compression compression = Compression::kNone;
  std::FILE* f = nullptr;
  z_stream z{};
  bool deflating = false;
  std::vector<char> out = std::vector<char>(1 << 16);

  absl::Status put(const char* data, size_t n, int flush) {
    if (compression == Compression::kNone) {
      if (n == 0) return absl::OkStatus();
      if (std::fwrite(data, 1, n, f) != n)
        return absl::DataLossError(str_cat(path, ": write error: ", std::strerror(errno)));
      return absl::OkStatus();
    }
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z.avail_in = static_cast<uInt>(n);
    do {
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      const int rc = deflate(&z, flush);
      if (rc == Z_STREAM_ERROR) return absl::InternalError(str_cat(path, ": zlib deflate failed"));
      const size_t produced = out.size() - z.avail_out;
      if (std::fwrite(out.data(), 1, produced, f) != produced) {
        return absl::DataLossError(str_cat(path, ": write error: ", std::strerror(errno)));
      }
    } while (z.avail_out == 0);
    return absl::OkStatus();
  }
};

TFRecordWriter::TFRecordWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TFRecordWriter::~TFRecordWriter() { (void)close(); }

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::open(const std::string& path,
                                                                     Compression compression) {
  if (compression == Compression::kAuto)
    return absl::InvalidArgumentError("a writer needs none, gzip or zlib, not auto");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->compression = compression;
  impl->f = std::fopen(path.c_str(), "wb");
  if (impl->f == nullptr)
    return absl::NotFoundError(str_cat("cannot create ", path, ": ", std::strerror(errno)));
  if (compression != Compression::kNone) {
    if (deflateInit2(&impl->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                     compression == Compression::kGzip ? 15 + 16 : 15, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      std::fclose(impl->f);
      return absl::InternalError(str_cat(path, ": zlib failed to initialise"));
    }
    impl->deflating = true;
  }
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(std::move(impl)));
}

absl::Status TFRecordWriter::write(const std::string& record) {
  if (impl_->f == nullptr)
    return absl::FailedPreconditionError(str_cat(impl_->path, ": written after close"));
  const std::string framed = frame_record(record);
  return impl_->put(framed.data(), framed.size(), Z_NO_FLUSH);
}

absl::Status TFRecordWriter::close() {
  if (impl_ == nullptr || impl_->f == nullptr) return absl::OkStatus();
  absl::Status s;
  if (impl_->deflating) {
    s = impl_->put(nullptr, 0, Z_FINISH);
    deflateEnd(&impl_->z);
    impl_->deflating = false;
  }
  if (std::fclose(impl_->f) != 0 && s.ok())
    s = absl::DataLossError(str_cat(impl_->path, ": close failed"));
  impl_->f = nullptr;
  return s;
}

}  // namespace tpusim::runtime::data
