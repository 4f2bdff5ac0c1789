#pragma once
// Files a user names for tpusim to read (configs, traces, saved models, sweep folders, records),
// opened so that what they are cannot hang or exhaust a reader: what is not a regular file (a
// FIFO, a device such as /dev/zero, a socket, a directory) is refused naming what it is, and
// opening never blocks (a FIFO with no writer would block open(2) itself, so O_NONBLOCK); a file
// read whole is held to its kind's cap and to the host's memory budget by its size before a
// byte is read (docs/reliability.md, "Budgets").

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/host_budget.h"
#include "common/strings.h"

namespace tpusim {

namespace input_file_internal {

// "a FIFO", "a directory", ... for what st_mode says a path is.
inline const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` without blocking and checks it is a regular file; its size in *size.
inline absl::Status open_regular(const std::string& path, const std::string& what, Fd* out,
                                 uint64_t* size) {
  out->fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (out->fd < 0) {
    const int err = errno;
    const std::string why = str_cat("cannot open ", what, " ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(why) : absl::InvalidArgumentError(why);
  }
  struct stat st {};
  if (::fstat(out->fd, &st) != 0)
    return absl::InvalidArgumentError(str_cat("cannot stat ", what, " ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        str_cat(what, " ", path, " is ", kind_of(st.st_mode), ", not a regular file"));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

}  // namespace input_file_internal

// OK when `path` is a regular file this process can open; else NotFound (it is not there) or
// InvalidArgument naming `what` ("trace"), the path and what it is ("is a FIFO"). For
// readers that stream a file themselves: ask before opening it.
inline absl::Status check_regular_file(const std::string& path, const std::string& what) {
  input_file_internal::Fd fd;
  uint64_t size = 0;
  return input_file_internal::open_regular(path, what, &fd, &size);
}

// The whole of the regular file `path`, `what` it is naming it in errors. Refused by its size,
// before it is read, when over `max_bytes` (a kind's cap: a config is kilobytes) or over the
// host's memory budget; a file that grows while it is read is refused.
inline absl::StatusOr<std::string> read_input_file(const std::string& path, const std::string& what,
                                                   uint64_t max_bytes) {
  input_file_internal::Fd fd;
  uint64_t size = 0;
  if (auto s = input_file_internal::open_regular(path, what, &fd, &size); !s.ok()) return s;
  const auto over_cap = [&](uint64_t bytes) {
    return absl::InvalidArgumentError(str_cat(what, " ", path, " is ", byte_size(bytes),
                                              ", over the cap of ", byte_size(max_bytes), " for a ",
                                              what));
  };
  if (size > max_bytes) return over_cap(size);
  if (auto s = check_host_memory(str_cat("reading ", what, " ", path), size); !s.ok()) return s;
  std::string text(static_cast<size_t>(size), '\0');
  uint64_t got = 0;
  char extra = 0;
  for (;;) {
    char* into = got < size ? text.data() + got : &extra;
    const size_t want = got < size ? static_cast<size_t>(size - got) : 1;
    const ssize_t n = ::read(fd.fd, into, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(
          str_cat("error reading ", what, " ", path, " at byte ", got, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    if (got >= size) {  // grew while read: refused, not read on
      return absl::DataLossError(
          str_cat(what, " ", path, " grew past its ", byte_size(size), " while it was read"));
    }
    got += static_cast<uint64_t>(n);
  }
  text.resize(static_cast<size_t>(got));
  return text;
}

}  // namespace tpusim
