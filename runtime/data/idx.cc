#include "runtime/data/idx.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/input_file.h"
#include "common/strings.h"
#include "runtime/data/byte_source.h"

namespace tpusim::runtime::data {

size_t IdxArray::row_size() const {
  size_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

namespace {

// Reads exactly `n` bytes at stream offset `at`; the error says what was being read.
absl::Status read_exact(ByteSource& in, const std::string& path, uint64_t at, void* out, size_t n,
                        const char* what) {
  size_t done = 0;
  while (done < n) {
    auto got = in.read(static_cast<char*>(out) + done, n - done);
    if (!got.ok()) {
      return absl::DataLossError(
          str_cat(got.status().message(), " (reading ", what, " at byte offset ", at + done, ")"));
    }
    if (*got == 0) {
      return absl::DataLossError(str_cat(path, ": the file ends at byte offset ", at + done,
                                         " while reading ", what, " (", n, " bytes from offset ",
                                         at, ")"));
    }
    done += *got;
  }
  return absl::OkStatus();
}

// The file's bytes, inflated when it is gzip (its first two bytes 1f 8b), as TFRecord files
// are: every member read, and bytes after the last that are not one refused.
absl::StatusOr<std::unique_ptr<ByteSource>> open_idx(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return absl::NotFoundError(str_cat("cannot open IDX file ", path, ": ", std::strerror(errno)));
  unsigned char head[2] = {0, 0};
  const size_t got = std::fread(head, 1, 2, f);
  std::rewind(f);
  std::unique_ptr<ByteSource> raw = file_source(f, path);
  if (got == 2 && head[0] == 0x1f && head[1] == 0x8b)
    return inflate_source(std::move(raw), path, Compression::kGzip);
  return raw;
}

}  // namespace

absl::StatusOr<IdxArray> read_idx(const std::string& path) {
  if (auto s = check_regular_file(path, "IDX file"); !s.ok()) return s;
  auto opened = open_idx(path);
  if (!opened.ok()) return opened.status();
  ByteSource& f = **opened;
  uint8_t magic[4];
  if (auto s = read_exact(f, path, 0, magic, 4, "the magic number"); !s.ok()) return s;
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
    if (auto s = read_exact(f, path, 4 + 4 * d, be, 4, "a dimension"); !s.ok()) return s;
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
    if (auto s = read_exact(f, path, data_at + done, out.values.data() + done, n, "the values");
        !s.ok())
      return s;
    done += n;
  }
  char extra;
  auto more = f.read(&extra, 1);  // a gzip file's end: its trailer checked, nothing after it
  if (!more.ok()) return absl::DataLossError(more.status().message());
  if (*more > 0) {
    return absl::InvalidArgumentError(
        str_cat(path, ": byte offset ", data_at + count,
                ": trailing bytes after the values the header promises"));
  }
  return out;
}

}  // namespace tpusim::runtime::data
