#pragma once
// A bounded queue of infeed or outfeed entries of one core. The host link fills the infeed
// queue and drains the outfeed queue; the core's infeed and outfeed units do the other side.
// Whoever changes it notifies `changed` so the other side can go on.

#include <cstdint>
#include <deque>
#include <systemc>
#include <vector>

#include "traces/sink.h"

namespace tpusim::sim {

struct FeedEntry {
  uint64_t bytes = 0;
  std::vector<uint8_t> data;  // empty in timing-only runs
  uint64_t enqueued_cycle = 0;
  // Whether this entry ends a batch: a step's batch for one core is one TensorFlow infeed
  // enqueue (a whole tuple), which the runtime cuts into the entries its infeed dequeues take;
  // every entry but the batch's last says false. An entry of its own (an outfeed) is a batch.
  bool ends_batch = true;
};

// `depth` counts batches: a batch is held from its first entry's push to its last entry's pop,
// and a new batch may not start while `depth` are held (the entries of the batch being pushed
// always go in, as the enqueue of a whole tuple does).
struct FeedQueue {
  explicit FeedQueue(uint32_t capacity) : depth(capacity) {}
  // Whether the next push, which starts a batch unless one is being pushed, must wait.
  bool full() const { return !filling && batches_held >= depth; }
  bool empty() const { return entries.empty(); }
  void push(FeedEntry e) {
    if (!filling) ++batches_held;
    filling = !e.ends_batch;
    entries.push_back(std::move(e));
    if (entries.size() > high_water) high_water = entries.size();
    changed.notify(sc_core::SC_ZERO_TIME);
    sample();
  }
  FeedEntry pop() {
    FeedEntry e = std::move(entries.front());
    entries.pop_front();
    if (e.ends_batch) --batches_held;
    changed.notify(sc_core::SC_ZERO_TIME);
    sample();
    return e;
  }
  // After a failed run: every entry dropped (its change notification is the caller's to cancel).
  void clear() {
    entries.clear();
    batches_held = 0;
    filling = false;
    sample();
  }
  // Reports the queue's depth to `track` of `sink` at every change from now on.
  void observe(traces::Sink* sink, traces::TrackId track) {
    depth_sink = sink;
    depth_track = track;
  }
  void sample() const {
    if (depth_sink != nullptr && depth_sink->recording())
      depth_sink->counter(depth_track, sc_core::sc_time_stamp().value(),
                          static_cast<double>(entries.size()));
  }

  uint32_t depth;             // batches
  uint32_t batches_held = 0;  // with an entry pushed and its last entry not yet popped
  bool filling = false;       // a batch's entries are being pushed (its last is not in)
  std::deque<FeedEntry> entries;
  sc_core::sc_event changed;
  uint64_t high_water = 0;
  traces::Sink* depth_sink = nullptr;  // time stamps are ps: System sets that resolution
  traces::TrackId depth_track{};
};

}  // namespace tpusim::sim
