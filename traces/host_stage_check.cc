#include "traces/host_stage_check.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/strings.h"

namespace tpusim::traces {

absl::Status check_host_stage_batches(const RecordingSink& trace) {
  std::map<size_t, std::vector<std::pair<TimePs, TimePs>>> batches;  // by stage track
  for (const RecordingSink::Slice& s : trace.slices()) {
    const TrackInfo& info = trace.track(s.track);
    if (info.kind == TrackInfo::Kind::kHost && info.threads > 0)
      batches[static_cast<size_t>(s.track)].emplace_back(s.start, s.end);
  }
  for (auto& [track, spans] : batches) {
    const TrackInfo& info = trace.tracks()[track];
    std::sort(spans.begin(), spans.end());
    // The ends of the batches open at each start; a batch that ends as the next begins is over.
    std::priority_queue<TimePs, std::vector<TimePs>, std::greater<>> open;
    for (const auto& [start, end] : spans) {
      while (!open.empty() && open.top() <= start) open.pop();
      open.push(end);
      if (open.size() <= info.threads) continue;
      return absl::InvalidArgumentError(str_cat(
          "host stage '", info.name, "' (", info.threads, " thread", info.threads == 1 ? "" : "s",
          ") has ", open.size(), " batches at once at ",
          fmt::format("{:.9f}", static_cast<double>(start) / 1e12),
          " s, where each of its threads works one batch at a time: the trace is not one run's "
          "(its slices repeated, or two runs' merged?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::traces
