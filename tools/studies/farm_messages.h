#pragma once
// What rank 0 and the other ranks of a study's farm (point_farm.h) say to each other, and the
// files a point's process needs on either side. Messages are CBOR (RFC 8949, nlohmann's codec):
// a point's log or a path may hold bytes that are not UTF-8, which JSON text could not carry.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include <absl/status/statusor.h>
#include <nlohmann/json.hpp>

#include "tools/studies/point_farm.h"

namespace tpusim::studies::farm {

using Clock = std::chrono::steady_clock;

// Message tags.
enum Tag : int {
  kAsk = 1,     // a rank has a free slot
  kTask = 2,    // rank 0: a job for that slot
  kNoMore = 3,  // rank 0: no job left for that slot
  kResult = 4,  // a rank: a job ended; its report and log
  kBeat = 5,    // either way: still here
  kBye = 6,     // a rank: every ask answered, every job reported; it ends
  kStop = 7,    // rank 0: the study ended before its points ran; end now
};

// How often a rank says it is still here.
constexpr double kBeatSeconds = 1.0;

double seconds_since(Clock::time_point t);

// A task: the job, its index and the marker file whose presence tells a rank that it shares rank
// 0's study folder.
std::string encode_task(size_t index, const FarmJob& job, const std::string& marker);
struct Task {
  size_t index = 0;
  FarmJob job;
  std::string marker;
};
absl::StatusOr<Task> decode_task(const std::string& bytes);

// A result: how the job ended, its report (when it wrote one) and its log.
struct Result {
  size_t index = 0;
  int exit_code = 0;
  double seconds = 0;
  bool has_report = false;
  std::string report, log;
};
std::string encode_result(const Result& r);
absl::StatusOr<Result> decode_result(const std::string& bytes);

// The file's bytes, or none when it cannot be read.
std::optional<std::string> read_bytes(const std::string& path);
// Writes `bytes` to `path` through a temporary file renamed over it, making its folder: a reader
// sees the old file or the new one, never half of it.
absl::Status write_bytes(const std::string& path, const std::string& bytes);

// Starts the job's process (its files prepared); its pid.
absl::StatusOr<int> start_job(const FarmJob& job);

}  // namespace tpusim::studies::farm
