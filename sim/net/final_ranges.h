#pragma once
// How the phases of a collective pipeline (chunk_schedule.h): the byte ranges of one member's
// buffer that one phase has made final (written to its dst in HBM, and when), and the chunk
// events of later phases that wait for a range not yet final, keyed by its first missing byte.
// Plain C++.

#include <cstdint>
#include <map>
#include <utility>

#include "sim/net/pass_run.h"

namespace tpusim::sim {

class FinalRanges {
 public:
  // The cycle by which every byte of [begin, end) was final (the latest write among them), or
  // -1 when a byte is not final yet; then `*missing` (when not null) is the first such byte.
  double written(uint64_t begin, uint64_t end, uint64_t* missing) const;

  // `e` waits until byte `missing` is final.
  void wait(uint64_t missing, const ChunkEvent& e) { waiting_.emplace(missing, e); }

  // [begin, end) is final from `cycle` on. Calls `wake(e)` for each event waiting for a byte of
  // it, its time raised to `cycle` at least: the event looks again (and may wait for the next
  // gap).
  template <typename Wake>
  void make_final(uint64_t begin, uint64_t end, double cycle, Wake&& wake) {
    ranges_[begin] = {end, cycle};
    const auto first = waiting_.lower_bound(begin), last = waiting_.lower_bound(end);
    for (auto it = first; it != last; ++it) {
      ChunkEvent e = it->second;
      e.time = std::max(e.time, cycle);
      wake(e);
    }
    waiting_.erase(first, last);
  }

 private:
  std::map<uint64_t, std::pair<uint64_t, double>> ranges_;  // begin -> (end, when written)
  std::multimap<uint64_t, ChunkEvent> waiting_;
};

}  // namespace tpusim::sim
