#pragma once
// The step-time analysis of a trace (docs/architecture.md, "Profiling"): where each training step's
// time went, in the TPU profiler's categories, and what to change.
//
// It reads the tracks the simulator and the estimator write: per core a "steps" track with one
// "step N" slice per device-loop iteration; "infeed.wait" and "outfeed.wait" slices where a feed
// unit waited on the host; on the "ici" track "ici.wait_for_peers" where a collective waited for
// the other members and the collective itself; host stage tracks ("host / map [4 threads]", one
// slice per batch) and the host loop's round trips between device loops.
//
// Per core and step, time is split exclusively, the first that applies winning: input (infeed
// wait), output (outfeed wait), compute where the core's busy track (analysis_events.h) says its
// DMA engines, MXUs or vector unit had work in progress, all_reduce_wait, all_reduce, else
// compute; so a collective that runs under the core's own work (tpusim's overlapped all-reduce)
// counts only where it holds the core up, and the rest is reported as all_reduce_hidden. Idle is
// the gap from the step's end to the next step's start on that core (the host round trip after a
// device loop). A step's time is the maximum over cores, and its breakdown is that core's, so the
// categories sum to the step time. Averages are over the steps in the trace.
//
// Host stages are a production line (runtime/infeed/host_model.h): at steady state a step takes
// as long as the device's own work or the slowest stage's time for the step's batches, whichever
// is longer; the what-ifs apply that with the slowest stage's time divided by 2 and 4 (more
// threads, assuming the host has the cores for them). Each chip's host link ("h2d" slices on its
// "host_link" track) is the line's last station: the busiest link's transfer time per step bounds
// the step too, and more threads do not shorten it; fewer bytes (bf16 infeeds) do.

#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <nlohmann/json.hpp>

#include "traces/recording_sink.h"

namespace tpusim::traces {

// The TPU profiler's thresholds (docs/references.md, "What TPU profilers report").
inline constexpr double kHighlyInputBound = 0.20;
inline constexpr double kModeratelyInputBound = 0.05;
inline constexpr double kHostOverheadNote = 0.03;
inline constexpr double kAllReduceNote = 0.06;
inline constexpr double kOutputNote = 0.05;

inline const char* const kCategories[] = {"compute",    "input",           "output",
                                          "all_reduce", "all_reduce_wait", "idle"};

struct StepBreakdown {
  int64_t step = 0;
  double seconds = 0;
  int chip = 0, core = 0;                    // the slowest core, whose breakdown this is
  std::map<std::string, double> seconds_by;  // category -> seconds (every kCategories entry)
  double all_reduce_hidden = 0;              // collective seconds under compute (in "compute")
  // The longest infeed wait of any other core in this step: a peer fed late reaches the
  // all-reduce late, and this core's wait for it is input time in disguise.
  double peers_input = 0;
};

struct HostStageFigures {
  std::string name;
  uint32_t threads = 0;
  uint64_t batches = 0;
  double seconds_per_batch = 0;  // wall time of one batch in the stage
  double seconds_per_step = 0;   // of all the batches a step takes (one per core it feeds)
};

struct WhatIf {
  std::string stage;
  uint32_t threads = 0;
  double step_seconds = 0;
  // What then sets the step: "device" (its own work) or the host stage that is then the slowest
  // (another stage as slow as this one makes more threads here useless on their own).
  std::string limited_by;
};

struct Analysis {
  std::vector<StepBreakdown> steps;
  double step_seconds = 0;                  // averaged over steps
  std::map<std::string, double> breakdown;  // averaged; sums to step_seconds
  double all_reduce_hidden = 0;             // averaged; part of breakdown["compute"]
  double peers_input = 0;                   // averaged StepBreakdown::peers_input
  double input_fraction = 0;
  std::string classification;  // highly_input_bound, moderately_input_bound, not_input_bound
  std::vector<HostStageFigures> host_stages;
  int slowest_stage = -1;       // index into host_stages, -1 without host stage tracks
  std::vector<WhatIf> what_if;  // the slowest stage at 2x and 4x its threads
  // The busiest chip's host link: its transfers' seconds per step (0 without host_link tracks).
  double host_link_seconds_per_step = 0;
  int host_link_chip = -1;
  // Whether the link, not a host stage, is the host side's bottleneck (slower than every stage).
  bool host_link_slowest() const;
  std::vector<std::string> advice;

  nlohmann::ordered_json to_json() const;
  std::string to_text() const;  // the human-readable report
};

// The classification of an input-wait fraction.
std::string classify_input(double input_fraction);

// FailedPrecondition when the trace has no step slices (a trace of no training steps).
absl::StatusOr<Analysis> analyze(const RecordingSink& trace);

}  // namespace tpusim::traces
