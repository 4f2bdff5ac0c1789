#include "runtime/data/idx.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <zlib.h>

#include "common/input_file.h"
#include "common/strings.h"

namespace tpusim::runtime::data {

size_t IdxArray::row_size() const {
  size_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads exactly `n` bytes at stream offset `at`; the error says what was being read.
absl::Status read_exact(gzFile f, const std::string& path, uint64_t at, void* out, size_t n,
                        const char* what) {
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, static_cast<char*>(out) + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      return absl::DataLossError(str_cat(path, ": corrupt compressed data reading ", what,
                                         " at byte offset ", at + done, ": ", msg));
    }
    if (got == 0) {
      return absl::DataLossError(str_cat(path, ": the file ends at byte offset ", at + done,
                                         " while reading ", what, " (", n, " bytes from offset ",
                                         at, ")"));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<IdxArray> read_idx(const std::string& path) {
  if (auto s = check_regular_file(path, "IDX file"); !s.ok()) return s;
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (f == nullptr)
    return absl::NotFoundError(str_cat("cannot open IDX file ", path, ": ", std::strerror(errno)));
  uint8_t magic[4];
  if (auto s = read_exact(f.get(), path, 0, magic, 4, "the magic number"); !s.ok()) return s;
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(
        str_cat(path,
                ": not an IDX file (byte offset 0: the magic number must start with "
                "two zero bytes)"));
  }
  if (magic[2] != 0x08) {
    return absl::UnimplementedError(fmt::format(
        "{}: byte offset 2: IDX type 0x{:02x} is not supported (only 0x08, unsigned bytes)", path,
        magic[2]));
  }
  const int rank = magic[3];
  if (rank == 0)
    return absl::InvalidArgumentError(
        str_cat(path, ": byte offset 3: an IDX array needs a dimension"));
  IdxArray out;
  uint64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    uint8_t be[4];
    if (auto s = read_exact(f.get(), path, 4 + 4 * d, be, 4, "a dimension"); !s.ok()) return s;
    const uint32_t size =
        (uint32_t{be[0]} << 24) | (uint32_t{be[1]} << 16) | (uint32_t{be[2]} << 8) | be[3];
    out.dims.push_back(size);
    count *= size;
    if (count > (uint64_t{1} << 34)) {
      return absl::InvalidArgumentError(str_cat(path, ": byte offset ", 4 + 4 * d,
                                                ": the dimensions promise more than ",
                                                uint64_t{1} << 34, " values"));
    }
  }
  const uint64_t data_at = 4 + 4 * static_cast<uint64_t>(rank);
  // In blocks as the data arrives: a header promising billions of values in a short file fails
  // at its end having held only what the file has.
  constexpr uint64_t kBlock = 16 << 20;
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min(kBlock, count - done);
    out.values.resize(done + n);
    if (auto s =
            read_exact(f.get(), path, data_at + done, out.values.data() + done, n, "the values");
        !s.ok())
      return s;
    done += n;
  }
  char extra;
  const int more = gzread(f.get(), &extra, 1);
  if (more > 0) {
    return absl::InvalidArgumentError(
        str_cat(path, ": byte offset ", data_at + count,
                ": trailing bytes after the values the header promises"));
  }
  int code = Z_OK;
  const char* message = gzerror(f.get(), &code);
  if (more < 0 || code != Z_OK) {  // a gzip stream cut short: its CRC32 and length never checked
    return absl::DataLossError(str_cat(path, ": the compressed stream does not end properly (",
                                       message,
                                       "): its CRC32 and length trailer is missing or "
                                       "wrong"));
  }
  return out;
}

}  // namespace tpusim::runtime::data
