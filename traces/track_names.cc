#include "traces/track_names.h"

#include <cstdio>

#include "common/strings.h"

namespace tpusim::traces {

int pid_of(const TrackInfo& info) { return info.chip < 0 ? kHostPid : 2 + info.chip; }

std::string process_label(const TrackInfo& info) {
  return info.chip < 0 ? "host" : str_cat("chip ", info.chip);
}

std::string track_label(const TrackInfo& info) {
  std::string place = info.chip < 0 ? "host" : info.core < 0 ? "chip" : str_cat("core ", info.core);
  std::string label = str_cat(place, " / ", info.name);
  if (info.threads > 0) label += str_cat(" [", info.threads, " threads]");
  return label;
}

absl::StatusOr<TrackInfo> parse_track_label(TrackInfo::Kind kind, int pid, const std::string& label,
                                            const std::string& unit) {
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(str_cat("track '", label, "' (pid ", pid, "): ", why,
                                              "; tpusim names tracks 'core N / unit', 'chip / "
                                              "unit' or 'host / stage'"));
  };
  const size_t slash = label.find(" / ");
  if (slash == std::string::npos) return bad("no ' / ' between place and name");
  const std::string place = label.substr(0, slash);
  std::string name = label.substr(slash + 3);
  TrackInfo info;
  info.kind = kind;
  info.unit = unit;
  if (pid == kHostPid) {
    if (place != "host") return bad("a host track's place must be 'host'");
    if (kind != TrackInfo::Kind::kCounter) info.kind = TrackInfo::Kind::kHost;
  } else if (pid >= 2) {
    info.chip = pid - 2;
    if (place == "chip") {
      info.core = -1;
    } else {
      int core = -1;
      char extra = 0;
      if (std::sscanf(place.c_str(), "core %d%c", &core, &extra) != 1 || core < 0)
        return bad("the place must be 'core N' or 'chip'");
      info.core = core;
    }
  } else {
    return bad("pid must be 1 (host) or 2 + chip");
  }
  const size_t open = name.rfind(" [");
  if (open != std::string::npos && name.size() > open + 2 && name.back() == ']') {
    unsigned threads = 0;
    if (std::sscanf(name.c_str() + open, " [%u threads]", &threads) == 1 && threads > 0) {
      info.threads = threads;
      name.resize(open);
    }
  }
  if (name.empty()) return bad("empty name");
  info.name = name;
  return info;
}

}  // namespace tpusim::traces
