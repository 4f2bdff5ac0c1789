#include "sim/net/final_ranges.h"

#include <algorithm>

namespace tpusim::sim {

double FinalRanges::written(uint64_t begin, uint64_t end, uint64_t* missing) const {
  // Walk the final ranges from the one holding `begin` to the first gap or `end`.
  double written = 0;
  uint64_t at = begin;
  auto it = ranges_.upper_bound(at);
  if (it != ranges_.begin()) --it;
  for (; at < end && it != ranges_.end() && it->first <= at; ++it) {
    if (it->second.first <= at) continue;
    written = std::max(written, it->second.second);
    at = it->second.first;
  }
  if (at < end) {
    if (missing != nullptr) *missing = at;
    return -1;
  }
  return written;
}

}  // namespace tpusim::sim
