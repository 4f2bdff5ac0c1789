#pragma once
// TensorBoard event files (docs/references.md, "File formats"): TFRecord framing of Event
// protos in `events.out.tfevents.<10-digit unix seconds>.<hostname>`, the first record
// Event{wall_time, file_version: "brain.Event:2"}, then scalar summaries (simple_value), which
// TensorBoard's scalars dashboard shows. Every event is flushed as written, so a TensorBoard
// watching model_dir sees it at once.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <absl/status/statusor.h>

namespace tpusim::estimator {

class SummaryWriter {
 public:
  // A new event file in `dir` (created when absent).
  static absl::StatusOr<std::unique_ptr<SummaryWriter>> create(const std::string& dir);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  absl::Status add_scalar(const std::string& tag, double value, int64_t step);
  const std::string& path() const { return path_; }

 private:
  SummaryWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  absl::Status write_event(const std::string& serialized);

  std::string path_;
  std::FILE* file_;
};

}  // namespace tpusim::estimator
