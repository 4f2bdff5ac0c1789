#pragma once
// A counter track of a rate that several overlapping transfers add to (the HBM bandwidth a
// core's DMA engines draw): each transfer adds `rate` over [start, end). Samples go out in time
// order: a transfer added with a start before the latest sample (the collective engine books
// some HBM requests a little before the current time) is shifted to start at that sample, with
// its length and rate, so the counter's integral stays the bytes moved.

#include <algorithm>
#include <cstdint>
#include <queue>
#include <vector>

#include "traces/sink.h"

namespace tpusim::sim {

class RateCounter {
 public:
  RateCounter() = default;
  RateCounter(traces::Sink* sink, traces::TrackId track) : sink_(sink), track_(track) {}

  // A transfer at `rate` (units per second) over [start, end) picoseconds.
  void add(traces::TimePs start, traces::TimePs end, double rate) {
    if (sink_ == nullptr || !sink_->recording() || end <= start) return;
    if (start < last_) {  // shifted to start at the latest sample, same length and rate
      end += last_ - start;
      start = last_;
    }
    retire_until(start);
    last_ = start;
    level_ += rate;
    ends_.push({end, rate});
    sink_->counter(track_, start, level_);
  }

  // `bytes` moved over [start, end) picoseconds, at an even rate (nothing for an empty span).
  void add_bytes(traces::TimePs start, traces::TimePs end, double bytes) {
    if (end > start) add(start, end, bytes * 1e12 / static_cast<double>(end - start));
  }

  // Emits the drops of every transfer that has ended by `time` (all of them with UINT64_MAX).
  void retire_until(traces::TimePs time) {
    while (!ends_.empty() && ends_.top().first <= time) {
      const auto [end, rate] = ends_.top();
      ends_.pop();
      level_ -= rate;
      if (ends_.empty()) level_ = 0;  // no drift from floating-point sums
      if (ends_.empty() || ends_.top().first != end) {
        sink_->counter(track_, end, level_);
        last_ = end;
      }
    }
  }

 private:
  using End = std::pair<traces::TimePs, double>;
  traces::Sink* sink_ = nullptr;
  traces::TrackId track_{};
  double level_ = 0;
  traces::TimePs last_ = 0;  // the latest sample's time
  std::priority_queue<End, std::vector<End>, std::greater<>> ends_;
};

}  // namespace tpusim::sim
