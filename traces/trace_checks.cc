#include "traces/trace_checks.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/strings.h"
#include "traces/analysis_events.h"
#include "traces/xspace_events.h"

namespace tpusim::traces {
namespace {

std::string seconds_at(TimePs t) { return fmt::format("{:.9f} s", static_cast<double>(t) / 1e12); }

}  // namespace

absl::Status check_host_stage_batches(const RecordingSink& trace) {
  // By stage name: a stage declared twice (two traces merged) is still one stage's threads.
  std::map<std::string, std::vector<std::pair<TimePs, TimePs>>> batches;
  std::map<std::string, const TrackInfo*> stages;
  for (const RecordingSink::Slice& s : trace.slices()) {
    const TrackInfo& info = trace.track(s.track);
    if (info.kind != TrackInfo::Kind::kHost || info.threads == 0) continue;
    batches[info.name].emplace_back(s.start, s.end);
    const TrackInfo*& stage = stages[info.name];
    if (stage == nullptr || info.threads > stage->threads) stage = &info;
  }
  for (auto& [name, spans] : batches) {
    const TrackInfo& info = *stages[name];
    std::sort(spans.begin(), spans.end());
    // The ends of the batches open at each start; a batch that ends as the next begins is over.
    std::priority_queue<TimePs, std::vector<TimePs>, std::greater<>> open;
    for (const auto& [start, end] : spans) {
      while (!open.empty() && open.top() <= start) open.pop();
      open.push(end);
      if (open.size() <= info.threads) continue;
      return absl::InvalidArgumentError(str_cat(
          "host stage '", info.name, "' (", info.threads, " thread", info.threads == 1 ? "" : "s",
          ") has ", open.size(), " batches at once at ", seconds_at(start),
          ", where each of its threads works one batch at a time: the trace is not one run's "
          "(its slices repeated, or two runs' merged?)"));
    }
  }
  return absl::OkStatus();
}

int64_t step_of_slice(const std::string& name) {
  constexpr std::string_view kPrefix = "step ";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  return parse_step_number(name.substr(kPrefix.size())).value_or(-1);
}

absl::Status check_core_steps(const RecordingSink& trace) {
  struct Step {
    int64_t n;
    TimePs start, end;
  };
  // By core: a core's steps track declared twice (two traces merged) is still one core's.
  std::map<std::pair<int, int>, std::vector<Step>> steps;
  for (const RecordingSink::Slice& s : trace.slices()) {
    const TrackInfo& info = trace.track(s.track);
    if (info.kind != TrackInfo::Kind::kUnit || info.name != kStepsTrack) continue;
    const std::string core = str_cat("chip ", info.chip, " core ", info.core);
    const int64_t n = step_of_slice(s.name);
    if (n < 0) {
      return absl::InvalidArgumentError(str_cat(core, "'s steps track holds a slice named '",
                                                s.name, "' at ", seconds_at(s.start),
                                                ", where each is 'step N' (N a whole number)"));
    }
    if (s.end <= s.start) {
      return absl::InvalidArgumentError(
          str_cat(core, "'s step ", n, " at ", seconds_at(s.start), " lasts no time"));
    }
    steps[{info.chip, info.core}].push_back({n, s.start, s.end});
  }
  for (auto& [chip_core, list] : steps) {
    const std::string core = str_cat("chip ", chip_core.first, " core ", chip_core.second);
    std::sort(list.begin(), list.end(), [](const Step& a, const Step& b) { return a.n < b.n; });
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i].n == list[i - 1].n) {
        return absl::InvalidArgumentError(str_cat(
            core, "'s step ", list[i].n, " appears twice (at ", seconds_at(list[i - 1].start),
            " and ", seconds_at(list[i].start), "): the trace is not one run's"));
      }
    }
    std::sort(list.begin(), list.end(),
              [](const Step& a, const Step& b) { return a.start < b.start; });
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i].start < list[i - 1].end) {
        return absl::InvalidArgumentError(
            str_cat(core, "'s step ", list[i].n, " begins at ", seconds_at(list[i].start),
                    ", before step ", list[i - 1].n, " ends at ", seconds_at(list[i - 1].end),
                    ": a core runs one step at a time"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::traces
