#include "tools/tpusim/progress_bar.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tpusim::cli {

std::string ProgressBar::render(int64_t step, int64_t target, double steps_per_second, int width) {
  const double done = target > 0 ? std::clamp(static_cast<double>(step) / target, 0.0, 1.0) : 0;
  const int filled = static_cast<int>(std::floor(done * width));
  std::string text = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " +
                     fmt::format("{}/{} steps", step, target);
  if (steps_per_second > 0) {
    const auto eta = static_cast<int64_t>(std::ceil((target - step) / steps_per_second));
    text += fmt::format("  {:.2f} steps/s  ETA {}:{:02d}", steps_per_second, eta / 60, eta % 60);
  }
  return text;
}

void ProgressBar::update(int64_t step, int64_t target) {
  const auto now = std::chrono::steady_clock::now();
  if (!timing_) {
    timing_ = true;
    first_step_ = step;
    first_time_ = now;
  } else if (step > first_step_) {
    const double seconds = std::chrono::duration<double>(now - first_time_).count();
    if (seconds > 0) rate_ = static_cast<double>(step - first_step_) / seconds;
  }
  step_ = step;
  target_ = target;
  draw();
}

void ProgressBar::draw() {
  out_ << "\r\033[K" << render(step_, target_, rate_, width_) << std::flush;
  shown_ = true;
}

void ProgressBar::line(const std::string& text) {
  out_ << "\r\033[K" << text << "\n";
  if (shown_) {
    draw();
  } else {
    out_ << std::flush;
  }
}

void ProgressBar::finish() {
  if (shown_) out_ << "\n" << std::flush;
  shown_ = false;
}

}  // namespace tpusim::cli
