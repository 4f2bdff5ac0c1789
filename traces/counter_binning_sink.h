#pragma once
// Averages rate counters over fixed windows on their way to a trace file. A link's utilisation
// changes at every chunk it carries: on a pod that is millions of samples a step, more than a
// trace viewer loads comfortably. Binned, a rate track (a "fraction" or ".../s" unit: link
// utilisation, HBM bandwidth) gets at most one sample per window, the window's average, and
// only where it changes; the integral over each window (the bytes moved in it) stays exact.
// Spans, and counters of other units (queue depths), pass through unchanged.
//
// Each binned track's samples must come in time order (RateCounter's do). A window's average
// goes out once a later sample closes it, or at flush().

#include <vector>

#include "traces/sink.h"

namespace tpusim::traces {

class CounterBinningSink final : public Sink {
 public:
  // Forwards to `target` (not owned), averaging rate counters over windows of `window`
  // picoseconds (> 0), aligned to multiples of it.
  CounterBinningSink(Sink* target, TimePs window);

  // Whether a counter track's values are rates whose window average means something.
  static bool is_rate(const TrackInfo& info);

  TrackId declare_track(const TrackInfo& info) override;
  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override;
  void counter(TrackId track, TimePs time, double value) override;
  bool recording() const override { return target_->recording(); }

  // Sends every binned track's open window (its average up to its last sample) and last value.
  void flush();

 private:
  struct Binned {
    bool binned = false;
    bool started = false;
    TimePs window_start = 0;
    TimePs since = 0;     // the latest sample's time
    double value = 0;     // from `since` on
    double integral = 0;  // value x ps over [window_start, since)
    double sent = 0;      // the last value sent
    bool any_sent = false;
  };
  void send(TrackId track, Binned& b, TimePs time, double value);
  // Closes every window that ends by `time`.
  void advance(TrackId track, Binned& b, TimePs time);

  Sink* target_;
  TimePs window_;
  std::vector<Binned> tracks_;  // by our TrackId, which is the target's
};

}  // namespace tpusim::traces
