#include "runtime/data/byte_source.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include <zlib.h>

#include "common/strings.h"

namespace tpusim::runtime::data {

namespace {

class FileSource final : public ByteSource {
 public:
  FileSource(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  ~FileSource() override { std::fclose(f_); }
  absl::StatusOr<size_t> read(char* out, size_t n) override {
    const size_t got = std::fread(out, 1, n, f_);
    if (got < n && std::ferror(f_))
      return absl::DataLossError(str_cat(path_, ": read error: ", std::strerror(errno)));
    return got;
  }

 private:
  std::FILE* f_;
  std::string path_;
};

class InflateSource final : public ByteSource {
 public:
  InflateSource(std::unique_ptr<ByteSource> raw, std::string path, Compression c)
      : raw_(std::move(raw)), path_(std::move(path)), in_(1 << 16), gzip_(c == Compression::kGzip) {
    std::memset(&z_, 0, sizeof z_);
    // 15 + 16: gzip framing; 15: zlib framing.
    ok_ = inflateInit2(&z_, c == Compression::kGzip ? 15 + 16 : 15) == Z_OK;
  }
  ~InflateSource() override { inflateEnd(&z_); }
  absl::StatusOr<size_t> read(char* out, size_t n) override {
    if (!ok_) return absl::InternalError(str_cat(path_, ": zlib failed to initialise"));
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out > 0 && !ended_) {
      if (z_.avail_in == 0) {
        auto got = raw_->read(in_.data(), in_.size());
        if (!got.ok()) return got.status();
        if (*got == 0) {
          return absl::DataLossError(str_cat(path_, ": the compressed stream is truncated (after ",
                                             decompressed(), " decompressed bytes)"));
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(*got);
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // A gzip file may hold several members: go on with the next one, if any.
        if (z_.avail_in == 0) {
          auto got = raw_->read(in_.data(), in_.size());
          if (!got.ok()) return got.status();
          if (*got == 0) {
            ended_ = true;
            break;
          }
          z_.next_in = reinterpret_cast<Bytef*>(in_.data());
          z_.avail_in = static_cast<uInt>(*got);
        }
        if (!gzip_) {  // a ZLIB file is one stream (TensorFlow's reader reads one)
          return absl::DataLossError(str_cat(path_, ": bytes after the ZLIB stream's end (at ",
                                             decompressed(),
                                             " decompressed bytes): a ZLIB file holds one stream"));
        }
        earlier_members_out_ += z_.total_out;  // inflateReset restarts the member's count
        ++members_;
        inflateReset(&z_);
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::DataLossError(str_cat(
            path_, ": corrupt compressed data after ", decompressed(), " decompressed bytes",
            members_ > 0 ? str_cat(" (in what follows gzip member ", members_, ")") : "", ": ",
            z_.msg != nullptr ? z_.msg : "zlib error"));
      }
    }
    return n - z_.avail_out;
  }

 private:
  std::unique_ptr<ByteSource> raw_;
  std::string path_;
  std::vector<char> in_;
  z_stream z_;
  bool gzip_;  // else ZLIB
  bool ok_ = false;
  bool ended_ = false;
  uint64_t earlier_members_out_ = 0;  // bytes the gzip members before this one decompressed to
  uint64_t members_ = 0;              // members ended so far
  // The bytes decompressed so far, over every member.
  uint64_t decompressed() const { return earlier_members_out_ + z_.total_out; }
};

}  // namespace

std::unique_ptr<ByteSource> file_source(std::FILE* f, std::string path) {
  return std::make_unique<FileSource>(f, std::move(path));
}

std::unique_ptr<ByteSource> inflate_source(std::unique_ptr<ByteSource> raw, std::string path,
                                           Compression c) {
  return std::make_unique<InflateSource>(std::move(raw), std::move(path), c);
}

}  // namespace tpusim::runtime::data
