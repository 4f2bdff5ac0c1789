#pragma once
// The progress bar `tpusim train` draws on a terminal, redrawn in place as the device finishes
// steps:  [############........] 120/200 steps  0.46 steps/s  ETA 2:54
// Log lines print above it. Off a terminal train prints periodic log lines instead.

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace tpusim::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::ostream& out, int width = 30) : out_(out), width_(width) {}

  // The device has finished global step `step` of `target`.
  void update(int64_t step, int64_t target);
  // Prints `text` on a line of its own above the bar.
  void line(const std::string& text);
  // Ends the bar's line (before other output).
  void finish();

  // The bar's text for step of target at `steps_per_second` (0: not known yet).
  static std::string render(int64_t step, int64_t target, double steps_per_second, int width);

 private:
  void draw();

  std::ostream& out_;
  int width_;
  bool shown_ = false;
  bool timing_ = false;
  int64_t first_step_ = 0;
  std::chrono::steady_clock::time_point first_time_;
  int64_t step_ = 0, target_ = 0;
  double rate_ = 0;
};

}  // namespace tpusim::cli
