#pragma once
// The file end of a trace writer: opens, appends bytes, remembers the first error and reports
// it, naming the file, when closed.

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "common/strings.h"

namespace tpusim::traces {

class FileOutput {
 public:
  explicit FileOutput(std::string path) : path_(std::move(path)) {}

  absl::Status open() {
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) {
      return absl::PermissionDeniedError(
          str_cat("cannot write the trace ", path_, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

  void write(const char* data, size_t size) {
    if (!status_.ok()) return;
    out_.write(data, static_cast<std::streamsize>(size));
    bytes_ += size;
    if (!out_) status_ = absl::DataLossError(str_cat("writing the trace ", path_, " failed"));
  }
  void write(const std::string& s) { write(s.data(), s.size()); }

  absl::Status close() {
    if (out_.is_open()) {
      out_.flush();
      if (!out_ && status_.ok())
        status_ = absl::DataLossError(str_cat("writing the trace ", path_, " failed"));
      out_.close();
    }
    return status_;
  }

  bool is_open() const { return out_.is_open(); }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::ofstream out_;
  absl::Status status_;
  uint64_t bytes_ = 0;
};

// Makes a writer of type W (constructed from the path, with an `absl::Status open()`) and opens it.
template <typename W, typename Base>
absl::StatusOr<std::unique_ptr<Base>> open_writer(const std::string& path) {
  auto w = std::make_unique<W>(path);
  if (auto s = w->open(); !s.ok()) return s;
  return std::unique_ptr<Base>(std::move(w));
}

}  // namespace tpusim::traces
