#include "traces/analyzer.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/strings.h"
#include "traces/analysis_events.h"
#include "traces/trace_checks.h"

namespace tpusim::traces {
namespace {

using Interval = std::pair<TimePs, TimePs>;

constexpr double kPsPerSecond = 1e12;

// The union of `v` as sorted disjoint intervals.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// Length of `a` minus `b` (both sorted and disjoint).
TimePs measure_minus(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  TimePs total = 0;
  size_t j = 0;
  for (const Interval& i : a) {
    TimePs at = i.first;
    while (j < b.size() && b[j].second <= at) ++j;
    for (size_t k = j; k < b.size() && b[k].first < i.second; ++k) {
      if (b[k].first > at) total += b[k].first - at;
      at = std::max(at, b[k].second);
      if (at >= i.second) break;
    }
    if (at < i.second) total += i.second - at;
  }
  return total;
}

// The spans of one core's waits of one kind, sorted by start.
struct Spans {
  std::vector<Interval> v;
  std::vector<Interval> within(TimePs start, TimePs end) const {
    std::vector<Interval> out;
    // One that overlaps `start` begins after start - longest.
    auto it =
        std::lower_bound(v.begin(), v.end(), Interval{start > longest ? start - longest : 0, 0});
    for (; it != v.end() && it->first < end; ++it) {
      const TimePs a = std::max(it->first, start), b = std::min(it->second, end);
      if (b > a) out.emplace_back(a, b);
    }
    return out;
  }
  TimePs longest = 0;
};

// The spans a core waits in; compute is what is left of the step.
enum Wait { kInput, kOutput, kAllReduceWait, kAllReduce, kWaits };

struct CoreTimeline {
  int chip = 0, core = 0;
  std::vector<std::pair<int64_t, Interval>> steps;  // (step, span), sorted by start
  Spans waits[kWaits];
  Spans busy;  // the core's compute units had work in progress (kBusyTrack)
};

std::string ms(double seconds) { return fmt::format("{:.3f} ms", seconds * 1e3); }
std::string pct(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

double seconds_of(TimePs t) { return static_cast<double>(t) / kPsPerSecond; }

// What the analysis reads from a trace's slices besides the host stages: each core's steps,
// waits and work, the host loop's round trips and each chip's host link.
struct Timelines {
  std::map<std::pair<int, int>, CoreTimeline> cores;
  std::vector<Interval> round_trips;  // the host loop's, sorted
  std::map<int, TimePs> link_busy;    // chip -> its host link's transfer time
};

// One slice on a core's unit track into its timeline.
void add_core_slice(const TrackInfo& info, const RecordingSink::Slice& s, CoreTimeline& c) {
  c.chip = info.chip;
  c.core = info.core;
  int wait = -1;
  if (info.name == kBusyTrack) {
    c.busy.v.emplace_back(s.start, s.end);
    c.busy.longest = std::max(c.busy.longest, s.end - s.start);
  } else if (info.name == kStepsTrack) {
    const int64_t n = step_of_slice(s.name);
    if (n >= 0) c.steps.push_back({n, {s.start, s.end}});
  } else if (s.name == kInfeedWait) {
    wait = kInput;
  } else if (s.name == kOutfeedWait) {
    wait = kOutput;
  } else if (s.name == kPeerWait) {
    wait = kAllReduceWait;
  } else if (info.name == kIciTrack) {
    wait = kAllReduce;
  }
  if (wait >= 0) {
    c.waits[wait].v.emplace_back(s.start, s.end);
    c.waits[wait].longest = std::max(c.waits[wait].longest, s.end - s.start);
  }
}

// The trace's slices sorted out: the host stages' batches into `host_stages` (each stage's mean
// seconds per batch), the rest into the timelines (sorted).
Timelines read_timelines(const RecordingSink& trace, std::vector<HostStageFigures>* host_stages) {
  Timelines t;
  std::map<size_t, size_t> stage_of_track;  // host stage track -> index in host_stages
  for (size_t k = 0; k < trace.tracks().size(); ++k) {
    const TrackInfo& info = trace.tracks()[k];
    if (info.kind == TrackInfo::Kind::kHost && info.threads > 0) {
      stage_of_track[k] = host_stages->size();
      host_stages->push_back({info.name, info.threads, 0, 0});
    }
  }
  for (const auto& s : trace.slices()) {
    const TrackInfo& info = trace.track(s.track);
    if (info.kind == TrackInfo::Kind::kHost) {
      if (info.name == kHostLoopTrack) t.round_trips.emplace_back(s.start, s.end);
      auto stage = stage_of_track.find(static_cast<size_t>(s.track));
      if (stage == stage_of_track.end()) continue;
      HostStageFigures& f = (*host_stages)[stage->second];
      ++f.batches;
      f.seconds_per_batch += static_cast<double>(s.end - s.start) / kPsPerSecond;
      continue;
    }
    if (info.kind == TrackInfo::Kind::kUnit && info.name == kHostLinkTrack) {
      t.link_busy[info.chip] += s.end - s.start;
      continue;
    }
    if (info.kind != TrackInfo::Kind::kUnit || info.core < 0) continue;
    add_core_slice(info, s, t.cores[{info.chip, info.core}]);
  }
  for (HostStageFigures& f : *host_stages) {
    if (f.batches > 0) f.seconds_per_batch /= static_cast<double>(f.batches);
  }
  std::sort(t.round_trips.begin(), t.round_trips.end());
  for (auto& [key, c] : t.cores) {
    std::sort(c.steps.begin(), c.steps.end(),
              [](const auto& x, const auto& y) { return x.second.first < y.second.first; });
    for (Spans& w : c.waits) std::sort(w.v.begin(), w.v.end());
    std::sort(c.busy.v.begin(), c.busy.v.end());
  }
  return t;
}

// Core `c`'s step `i` broken down by category. Idle: until the core's next step, or after its
// last one, to the end of the host round trip that follows.
StepBreakdown break_down_step(const CoreTimeline& c, size_t i,
                              const std::vector<Interval>& round_trips) {
  // Not a structured binding: the lambda below captures `span` (C++17 forbids capturing one).
  const int64_t n = c.steps[i].first;
  const Interval& span = c.steps[i].second;
  TimePs gap = 0;
  if (i + 1 < c.steps.size()) {
    if (c.steps[i + 1].second.first > span.second) gap = c.steps[i + 1].second.first - span.second;
  } else {
    auto rt = std::lower_bound(round_trips.begin(), round_trips.end(), Interval{span.second, 0});
    if (rt != round_trips.end()) gap = rt->second - span.second;
  }
  StepBreakdown b;
  b.step = n;
  b.chip = c.chip;
  b.core = c.core;
  // Each category in priority order takes the part of the step no earlier one took.
  std::vector<Interval> covered;
  auto in_step = [&](const Spans& spans) { return spans.within(span.first, span.second); };
  auto take = [&](std::vector<Interval> spans) {
    spans = merged(std::move(spans));
    const TimePs exclusive = measure_minus(spans, covered);
    covered.insert(covered.end(), spans.begin(), spans.end());
    covered = merged(std::move(covered));
    return exclusive;
  };
  const TimePs input = take(in_step(c.waits[kInput]));
  const TimePs output = take(in_step(c.waits[kOutput]));
  // The collectives' time outside input and output: what the core's own work covers of it
  // is hidden behind that work.
  std::vector<Interval> collectives = in_step(c.waits[kAllReduceWait]);
  for (const Interval& ar : in_step(c.waits[kAllReduce])) collectives.push_back(ar);
  const TimePs collective = measure_minus(merged(std::move(collectives)), covered);
  take(in_step(c.busy));  // compute
  const TimePs peer_wait = take(in_step(c.waits[kAllReduceWait]));
  const TimePs all_reduce = take(in_step(c.waits[kAllReduce]));
  const TimePs waits = input + output + peer_wait + all_reduce;
  b.seconds_by["input"] = seconds_of(input);
  b.seconds_by["output"] = seconds_of(output);
  b.seconds_by["all_reduce_wait"] = seconds_of(peer_wait);
  b.seconds_by["all_reduce"] = seconds_of(all_reduce);
  b.seconds_by["compute"] = seconds_of(span.second - span.first - waits);
  b.all_reduce_hidden = seconds_of(collective - peer_wait - all_reduce);
  b.seconds_by["idle"] = seconds_of(gap);
  b.seconds = seconds_of(span.second - span.first + gap);
  return b;
}

// Each step's slowest core's breakdown, with the most any other core waited for input in it.
std::map<int64_t, StepBreakdown> slowest_by_step(const Timelines& t) {
  std::map<int64_t, StepBreakdown> by_step;
  std::map<int64_t, std::vector<std::pair<std::pair<int, int>, double>>> inputs;  // per step
  for (const auto& [key, c] : t.cores) {
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const StepBreakdown b = break_down_step(c, i, t.round_trips);
      inputs[b.step].push_back({key, b.seconds_by.at("input")});
      auto it = by_step.find(b.step);
      if (it == by_step.end() || b.seconds > it->second.seconds) by_step[b.step] = b;
    }
  }
  for (auto& [n, b] : by_step) {
    for (const auto& [core, input] : inputs[n]) {
      if (core != std::make_pair(b.chip, b.core)) b.peers_input = std::max(b.peers_input, input);
    }
  }
  return by_step;
}

// The steps into `a`: each one's breakdown and their averages, and the input classification.
void average_steps(const std::map<int64_t, StepBreakdown>& by_step, Analysis* a) {
  for (const char* c : kCategories) a->breakdown[c] = 0;
  for (const auto& [n, b] : by_step) {
    a->step_seconds += b.seconds;
    a->all_reduce_hidden += b.all_reduce_hidden;
    a->peers_input += b.peers_input;
    for (const auto& [cat, s] : b.seconds_by) a->breakdown[cat] += s;
    a->steps.push_back(b);
  }
  const auto count = static_cast<double>(a->steps.size());
  a->step_seconds /= count;
  a->all_reduce_hidden /= count;
  a->peers_input /= count;
  for (auto& [cat, s] : a->breakdown) s /= count;
  a->input_fraction = a->step_seconds > 0 ? a->breakdown["input"] / a->step_seconds : 0;
  a->classification = classify_input(a->input_fraction);
}

// The host's figures per step (each stage's, the busiest host link's, the slowest stage), and
// what the host model predicts with more threads on the slowest stage: the steady step is the
// device's own time or the slowest stage's time per batch, whichever is longer.
void host_figures(const std::map<int, TimePs>& link_busy, Analysis* a) {
  const auto count = static_cast<double>(a->steps.size());
  const double device_only = a->step_seconds - a->breakdown["input"];
  for (HostStageFigures& f : a->host_stages) {
    // A step takes a batch per core from a per-core pipeline (PER_HOST_V2 deals them).
    f.seconds_per_step = f.seconds_per_batch * static_cast<double>(f.batches) / count;
  }
  for (const auto& [chip, busy] : link_busy) {
    const double per_step = static_cast<double>(busy) / kPsPerSecond / count;
    if (per_step > a->host_link_seconds_per_step) {
      a->host_link_seconds_per_step = per_step;
      a->host_link_chip = chip;
    }
  }
  for (size_t i = 0; i < a->host_stages.size(); ++i) {
    if (a->slowest_stage < 0 ||
        a->host_stages[i].seconds_per_step >
            a->host_stages[static_cast<size_t>(a->slowest_stage)].seconds_per_step) {
      a->slowest_stage = static_cast<int>(i);
    }
  }
  if (a->slowest_stage < 0) return;
  const HostStageFigures& slow = a->host_stages[static_cast<size_t>(a->slowest_stage)];
  for (uint32_t factor : {2u, 4u}) {
    // The link takes each step's batches after the stages: it bounds the step as they do.
    double host = a->host_link_seconds_per_step;
    std::string host_limit = std::string(kHostLinkTrack);
    for (size_t i = 0; i < a->host_stages.size(); ++i) {
      const double per = a->host_stages[i].seconds_per_step;
      const double then = static_cast<int>(i) == a->slowest_stage ? per / factor : per;
      if (then > host) {
        host = then;
        host_limit = a->host_stages[i].name;
      }
    }
    a->what_if.push_back({slow.name, slow.threads * factor, std::max(device_only, host),
                          host > device_only ? host_limit : "device"});
  }
}

// The advice for an input-bound run: what bounds the input (the host link or the slowest
// stage) and what more threads would give.
std::string input_advice(const Analysis& a) {
  std::string advice = str_cat(a.classification == "highly_input_bound" ? "Highly" : "Moderately",
                               " input-bound: the device waits for infeed ", pct(a.input_fraction),
                               " of each step.");
  if (a.host_link_slowest()) {
    advice += str_cat(" The host link is the bottleneck: each step's infeeds keep chip ",
                      a.host_link_chip, "'s link busy ", ms(a.host_link_seconds_per_step),
                      a.slowest_stage >= 0 ? ", longer than any host stage takes" : "",
                      "; more threads will not help, fewer bytes will "
                      "(cast float inputs to bfloat16 on the host: SimulatorOptions::bf16_infeeds, "
                      "tpusim train --infeed-dtype bf16).");
  } else if (a.slowest_stage >= 0) {
    const HostStageFigures& slow = a.host_stages[static_cast<size_t>(a.slowest_stage)];
    advice += str_cat(" The slowest host stage is '", slow.name, "' at ", ms(slow.seconds_per_step),
                      " per step on ", slow.threads, " thread(s); give it more threads (");
    for (size_t i = 0; i < a.what_if.size(); ++i) {
      const WhatIf& w = a.what_if[i];
      advice += str_cat(i ? "; " : "", w.threads, " threads: ", ms(w.step_seconds), " per step");
      if (w.limited_by != "device" && w.limited_by != w.stage)
        advice += str_cat(", where '", w.limited_by, "' then sets the step");
    }
    advice += str_cat(", now ", ms(a.step_seconds), ").");
  }
  return advice;
}

// The analysis's advice: input, host overhead, peers fed late, all-reduce, output, else
// compute-bound.
void add_advice(Analysis* a) {
  auto frac = [&](const char* cat) {
    return a->step_seconds > 0 ? a->breakdown.at(cat) / a->step_seconds : 0.0;
  };
  if (a->classification != "not_input_bound") a->advice.push_back(input_advice(*a));
  if (frac("idle") >= kHostOverheadNote) {
    a->advice.push_back(str_cat("Host overhead: the device idles ", pct(frac("idle")),
                                " of each step between device loops; a larger iterations_per_loop "
                                "spreads the host round trip over more steps."));
  }
  const double peers_input = a->step_seconds > 0 ? a->peers_input / a->step_seconds : 0;
  const bool peers_fed_late =
      frac("all_reduce_wait") >= kAllReduceNote && peers_input >= frac("all_reduce_wait") / 2;
  if (peers_fed_late) {
    // The peers were late because their infeed was: the all-reduce only passes the wait on.
    a->advice.push_back(str_cat(
        "Waiting for peers takes ", pct(frac("all_reduce_wait")),
        " of each step while other cores wait for infeed up to ", pct(peers_input),
        ": they reach the all-reduce late because their input is late (a chip's host link, say, "
        "feeds its cores one after the other), so count this wait as input too."));
  }
  // The exchange's own share: its wait for peers only where their input does not explain it.
  if (frac("all_reduce") + (peers_fed_late ? 0 : frac("all_reduce_wait")) >= kAllReduceNote) {
    a->advice.push_back(str_cat("All-reduce takes ", pct(frac("all_reduce")), " of each step and ",
                                "waiting for peers ", pct(frac("all_reduce_wait")),
                                "; larger per-core batches amortise the gradient exchange."));
  }
  if (frac("output") >= kOutputNote) {
    a->advice.push_back(str_cat("Output-bound: outfeed waits take ", pct(frac("output")),
                                " of each step; outfeed less per step (host_call tensors)."));
  }
  if (a->advice.empty()) {
    a->advice.push_back(str_cat("Compute-bound: ", pct(frac("compute")),
                                " of each step is the device's own work; nothing on the host or "
                                "interconnect to fix."));
  }
}

}  // namespace

std::string classify_input(double input_fraction) {
  if (input_fraction >= kHighlyInputBound) return "highly_input_bound";
  if (input_fraction >= kModeratelyInputBound) return "moderately_input_bound";
  return "not_input_bound";
}

absl::StatusOr<Analysis> analyze(const RecordingSink& trace) {
  if (absl::Status s = check_host_stage_batches(trace); !s.ok()) return s;
  if (absl::Status s = check_core_steps(trace); !s.ok()) return s;
  Analysis a;
  const Timelines timelines = read_timelines(trace, &a.host_stages);
  const std::map<int64_t, StepBreakdown> by_step = slowest_by_step(timelines);
  if (by_step.empty()) {
    return absl::FailedPreconditionError(
        "the trace has no training steps (no 'step N' slices on any core's steps track): record "
        "a run that trains, or widen --trace-steps");
  }
  average_steps(by_step, &a);
  host_figures(timelines.link_busy, &a);
  add_advice(&a);
  return a;
}

bool Analysis::host_link_slowest() const {
  if (host_link_seconds_per_step <= 0) return false;
  return slowest_stage < 0 || host_link_seconds_per_step >
                                  host_stages[static_cast<size_t>(slowest_stage)].seconds_per_step;
}

nlohmann::ordered_json Analysis::to_json() const {
  nlohmann::ordered_json j;
  j["steps"] = steps.size();
  j["step_seconds"] = step_seconds;
  j["step_breakdown"] = nlohmann::ordered_json::object();
  for (const char* c : kCategories) j["step_breakdown"][c] = breakdown.at(c);
  j["all_reduce_hidden"] = all_reduce_hidden;
  j["peers_input"] = peers_input;
  j["input_fraction"] = input_fraction;
  j["classification"] = classification;
  if (slowest_stage >= 0) {
    const HostStageFigures& s = host_stages[static_cast<size_t>(slowest_stage)];
    j["slowest_host_stage"] = {
        {"name", s.name}, {"threads", s.threads}, {"seconds_per_step", s.seconds_per_step}};
  }
  j["host_stages"] = nlohmann::ordered_json::array();
  for (const auto& s : host_stages) {
    j["host_stages"].push_back({{"name", s.name},
                                {"threads", s.threads},
                                {"batches", s.batches},
                                {"seconds_per_batch", s.seconds_per_batch},
                                {"seconds_per_step", s.seconds_per_step}});
  }
  j["host_link"] = {{"chip", host_link_chip},
                    {"seconds_per_step", host_link_seconds_per_step},
                    {"slowest", host_link_slowest()}};
  j["what_if"] = nlohmann::ordered_json::array();
  for (const auto& w : what_if) {
    j["what_if"].push_back({{"stage", w.stage},
                            {"threads", w.threads},
                            {"step_seconds", w.step_seconds},
                            {"limited_by", w.limited_by}});
  }
  j["advice"] = advice;
  j["per_step"] = nlohmann::ordered_json::array();
  for (const auto& s : steps) {
    nlohmann::ordered_json row = {
        {"step", s.step}, {"seconds", s.seconds}, {"chip", s.chip}, {"core", s.core}};
    for (const char* c : kCategories) row[c] = s.seconds_by.at(c);
    row["all_reduce_hidden"] = s.all_reduce_hidden;
    row["peers_input"] = s.peers_input;
    j["per_step"].push_back(row);
  }
  return j;
}

std::string Analysis::to_text() const {
  std::string out = str_cat("step time ", ms(step_seconds), " (average of ", steps.size(),
                            " step(s); the slowest core each step)\n");
  for (const char* c : kCategories) {
    const double s = breakdown.at(c);
    out += fmt::format("  {:<16} {:>12}  {:>6}\n", c, ms(s),
                       pct(step_seconds > 0 ? s / step_seconds : 0));
  }
  if (all_reduce_hidden > 0) {
    out += fmt::format("  ({} of all-reduce ran while the core computed: counted as compute)\n",
                       ms(all_reduce_hidden));
  }
  out += str_cat("classification: ", classification, " (input ", pct(input_fraction), ")\n");
  const bool link_slowest = host_link_slowest();
  if (slowest_stage >= 0 || host_link_chip >= 0) out += "host stages (wall time per step):\n";
  if (slowest_stage >= 0) {
    for (size_t i = 0; i < host_stages.size(); ++i) {
      const auto& s = host_stages[i];
      out += fmt::format(
          "  {:<10} {:>3} thread(s) {:>12}{}\n", s.name, s.threads, ms(s.seconds_per_step),
          !link_slowest && static_cast<int>(i) == slowest_stage ? "  <- slowest" : "");
    }
  }
  if (host_link_chip >= 0) {
    out += fmt::format("  {:<10} chip {:<6}   {:>12}{}\n", "host link", host_link_chip,
                       ms(host_link_seconds_per_step), link_slowest ? "  <- slowest" : "");
  }
  for (const auto& line : advice) out += str_cat("advice: ", line, "\n");
  return out;
}

}  // namespace tpusim::traces
