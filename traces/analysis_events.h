#pragma once
// The events the step analyzer (analyzer.h) reads, named once for the producers, the analyzer
// and the recording that keeps only them.

#include <string_view>

#include "traces/sink.h"

namespace tpusim::traces {

inline constexpr std::string_view kStepsTrack = "steps";  // per core: "step N" slices
inline constexpr std::string_view kIciTrack = "ici";      // per core: collectives
inline constexpr std::string_view kHostLoopTrack = "loop";
inline constexpr std::string_view kInfeedTrack = "infeed";  // per core: the infeed unit
inline constexpr std::string_view kInfeedWait = "infeed.wait";
inline constexpr std::string_view kOutfeedWait = "outfeed.wait";
inline constexpr std::string_view kPeerWait = "ici.wait_for_peers";
// Per chip: its host link carrying infeed entries to the device ("h2d" slices, one per entry).
inline constexpr std::string_view kHostLinkTrack = "host_link";
inline constexpr std::string_view kHostToDevice = "h2d";
// Per core: runs of time its DMA engines, MXUs or vector unit had work in progress
// (sim/stats/busy_track.h); a collective under them is hidden behind the core's work.
inline constexpr std::string_view kBusyTrack = "busy";
inline constexpr std::string_view kBusySlice = "busy";

inline bool analyzer_reads(const TrackInfo& track, std::string_view slice_name) {
  return track.kind == TrackInfo::Kind::kHost || track.name == kStepsTrack ||
         track.name == kIciTrack || track.name == kBusyTrack || track.name == kHostLinkTrack ||
         slice_name == kInfeedWait || slice_name == kOutfeedWait;
}

}  // namespace tpusim::traces
