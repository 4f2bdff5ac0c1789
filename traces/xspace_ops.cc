#include "traces/xspace_ops.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "common/input_file.h"
#include "common/strings.h"
#include "traces/xspace_events.h"

namespace tpusim::traces {
namespace {

// One op execution on a line, before its self time is known.
struct Execution {
  size_t op = 0;  // index into the ops being gathered
  TimePs start = 0, end = 0;
  uint64_t self = 0;
};

using Span = std::pair<TimePs, TimePs>;

// The ops gathered so far, by (name, category), and each op's figures.
class OpTable {
 public:
  size_t op(const std::string& name, const std::string& category, int64_t flops, int64_t bytes) {
    auto [it, added] = index_.try_emplace({name, category}, ops_.size());
    if (added) ops_.push_back({name, category, 0, 0, flops, bytes});
    return it->second;
  }
  ProfileOp& at(size_t i) { return ops_[i]; }
  std::vector<ProfileOp> take() { return std::move(ops_); }

 private:
  std::map<std::pair<std::string, std::string>, size_t> index_;
  std::vector<ProfileOp> ops_;
};

// Self times of one line's executions: each one's span less those nested inside it.
void take_nested_time(std::vector<Execution>* runs) {
  std::sort(runs->begin(), runs->end(), [](const Execution& a, const Execution& b) {
    return std::tie(a.start, b.end) < std::tie(b.start, a.end);
  });
  std::vector<Execution*> open;
  for (Execution& r : *runs) {
    r.self = r.end - r.start;
    while (!open.empty() && open.back()->end <= r.start) open.pop_back();
    if (!open.empty() && r.end <= open.back()->end) {
      Execution* parent = open.back();
      parent->self -= std::min(parent->self, r.end - r.start);
    }
    open.push_back(&r);
  }
}

// Whether `t` lies in one of the spans (sorted by start and disjoint: PlaneSteps::merged).
bool within(const std::vector<Span>& spans, TimePs t) {
  auto it = std::upper_bound(spans.begin(), spans.end(), t,
                             [](TimePs v, const Span& s) { return v < s.first; });
  return it != spans.begin() && t < std::prev(it)->second;
}

// Adds the executions (their self times taken) that start within a step to the table.
void count_within_steps(const std::vector<Execution>& runs, const std::vector<Span>& steps,
                        OpTable* table) {
  for (const Execution& r : runs) {
    if (!within(steps, r.start)) continue;
    ProfileOp& op = table->at(r.op);
    ++op.executions;
    op.self_ps += r.self;
  }
}

// A plane's step spans by step number, from events already read.
struct PlaneSteps {
  std::map<int64_t, Span> by_number;
  void add(int64_t step, Span span) {
    auto [it, added] = by_number.try_emplace(step, span);
    if (!added) {
      it->second.first = std::min(it->second.first, span.first);
      it->second.second = std::max(it->second.second, span.second);
    }
  }
  // The steps' spans sorted by start, overlapping ones merged: disjoint.
  std::vector<Span> merged() const {
    std::vector<Span> spans;
    for (const auto& [step, span] : by_number) spans.push_back(span);
    std::sort(spans.begin(), spans.end());
    std::vector<Span> out;
    for (const Span& s : spans) {
      if (!out.empty() && s.first < out.back().second) {
        out.back().second = std::max(out.back().second, s.second);
      } else {
        out.push_back(s);
      }
    }
    return out;
  }
};

int64_t metadata_int(const xprof::XPlane& plane, const xprof::XEventMetadata& m,
                     const std::string& name) {
  const xprof::XStat* s = find_stat(plane, m.stats(), name);
  return s == nullptr ? 0 : std::max<int64_t>(0, stat_int(*s).value_or(0));
}

// A /device:TPU:N plane: its steps and its XLA Ops executions.
absl::StatusOr<PlaneSteps> read_device_ops(const xprof::XPlane& plane, const std::string& where,
                                           OpTable* table) {
  PlaneSteps steps;
  std::vector<Execution> runs;
  const absl::Status read = visit_device_events(
      plane, where,
      {[&](int64_t step, Span span) { steps.add(step, span); },
       [&](const xprof::XEventMetadata& m, Span span) {
         const xprof::XStat* category = find_stat(plane, m.stats(), "hlo_category");
         const size_t op =
             table->op(m.name(), category ? stat_string(plane, *category).value_or("") : "",
                       metadata_int(plane, m, "flops"), metadata_int(plane, m, "bytes_accessed"));
         runs.push_back({op, span.first, span.second, 0});
       }});
  if (!read.ok()) return read;
  take_nested_time(&runs);  // the XLA Ops line's executions
  count_within_steps(runs, steps.merged(), table);
  return steps;
}

// The host plane of a host-only profile: events with a step_num stat are steps, events with an
// hlo_op stat op executions (self times taken line by line).
absl::StatusOr<PlaneSteps> read_host_ops(const xprof::XPlane& plane, const std::string& where,
                                         OpTable* table) {
  PlaneSteps steps;
  const absl::Status visited =
      visit_host_steps(plane, where, [&](int64_t step, Span span) { steps.add(step, span); });
  if (!visited.ok()) return visited;
  std::vector<Execution> runs;
  for (const xprof::XLine& line : plane.lines()) {
    const std::string at = str_cat(where, ", line '", line.name(), "'");
    std::vector<Execution> line_runs;
    for (const xprof::XEvent& e : line.events()) {
      const xprof::XStat* hlo_op = find_stat(plane, e.stats(), "hlo_op");
      if (hlo_op == nullptr) continue;
      auto span = event_span(line, e, at);
      if (!span.ok()) return span.status();
      const std::optional<std::string> name = stat_string(plane, *hlo_op);
      if (!name || name->empty()) {
        return absl::InvalidArgumentError(str_cat(at, ": an hlo_op stat that names no op"));
      }
      const xprof::XStat* category = find_stat(plane, e.stats(), "hlo_category");
      const size_t op =
          table->op(*name, category ? stat_string(plane, *category).value_or("") : "", 0, 0);
      line_runs.push_back({op, span->first, span->second, 0});
    }
    take_nested_time(&line_runs);
    runs.insert(runs.end(), line_runs.begin(), line_runs.end());
  }
  count_within_steps(runs, steps.merged(), table);
  return steps;
}

double plane_double(const xprof::XPlane& plane, const std::string& name) {
  const xprof::XStat* s = find_stat(plane, plane.stats(), name);
  return s == nullptr ? 0 : std::max(0.0, stat_double(*s).value_or(0));
}

// The average over step numbers of the slowest plane's span of that step.
double mean_step_ps(const std::vector<PlaneSteps>& planes, int64_t* steps) {
  std::map<int64_t, uint64_t> slowest;
  for (const PlaneSteps& p : planes) {
    for (const auto& [step, span] : p.by_number) {
      uint64_t& s = slowest[step];
      s = std::max<uint64_t>(s, span.second - span.first);
    }
  }
  *steps = static_cast<int64_t>(slowest.size());
  double sum = 0;
  for (const auto& [step, ps] : slowest) sum += static_cast<double>(ps);
  return slowest.empty() ? 0 : sum / static_cast<double>(slowest.size());
}

}  // namespace

absl::StatusOr<xprof::XSpace> parse_xspace_file(const std::string& path) {
  auto bytes = read_input_file(path, "profile", UINT64_MAX);
  if (!bytes.ok()) return bytes.status();
  xprof::XSpace space;
  if (!space.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(
        str_cat(path, ": not an XSpace (XProf's profile message does not parse)"));
  }
  return space;
}

absl::StatusOr<OpProfile> read_op_profile(const std::string& path) {
  auto space = parse_xspace_file(path);
  if (!space.ok()) return space.status();
  return op_profile_of(*space, path);
}

absl::StatusOr<OpProfile> op_profile_of(const xprof::XSpace& space, const std::string& path) {
  if (absl::Status s = check_plane_names(space, path); !s.ok()) return s;
  OpProfile out;
  out.path = path;
  OpTable table;
  std::vector<PlaneSteps> planes;
  const xprof::XPlane* host = nullptr;
  std::string host_where;
  for (int p = 0; p < space.planes_size(); ++p) {
    const xprof::XPlane& plane = space.planes(p);
    const std::string where = str_cat(path, ": plane ", p, " '", plane.name(), "'");
    if (plane.name() == kHostPlaneName) {
      host = &plane;
      host_where = where;
    }
    if (plane.name().rfind(kTpuPlanePrefix, 0) != 0) continue;
    auto steps = read_device_ops(plane, where, &table);
    if (!steps.ok()) return steps.status();
    planes.push_back(std::move(*steps));
    if (out.device.empty()) {
      const xprof::XStat* type = find_stat(plane, plane.stats(), "device_type_string");
      out.device = type ? stat_string(plane, *type).value_or("TPU") : "TPU";
      out.peak_teraflops_per_second = plane_double(plane, "peak_teraflops_per_second");
      out.peak_hbm_gigabytes_per_second = plane_double(plane, "peak_hbm_bw_gigabytes_per_second");
    }
  }
  if (planes.empty() && host != nullptr) {
    auto steps = read_host_ops(*host, host_where, &table);
    if (!steps.ok()) return steps.status();
    planes.push_back(std::move(*steps));
    out.device = "CPU";
  }
  out.devices = static_cast<int>(planes.size());
  out.step_ps = mean_step_ps(planes, &out.steps);
  if (out.steps == 0) {
    return absl::InvalidArgumentError(
        str_cat(path,
                ": no steps (a /device:TPU:N plane's Steps line, or host events with a "
                "step_num stat); an op's time a step needs them"));
  }
  out.ops = table.take();
  out.ops.erase(std::remove_if(out.ops.begin(), out.ops.end(),
                               [](const ProfileOp& op) { return op.executions == 0; }),
                out.ops.end());
  std::sort(out.ops.begin(), out.ops.end(), [](const ProfileOp& a, const ProfileOp& b) {
    return std::tie(b.self_ps, a.name, a.category) < std::tie(a.self_ps, b.name, b.category);
  });
  return out;
}

double OpProfile::seconds_per_step(const ProfileOp& op) const {
  return static_cast<double>(op.self_ps) * 1e-12 / static_cast<double>(steps) /
         static_cast<double>(std::max(1, devices));
}

std::string OpProfile::ops_text(size_t top) const {
  const size_t shown = top == 0 ? ops.size() : std::min(top, ops.size());
  std::string out = fmt::format(
      "ops ({} of {}, costliest first; time a step on one device, averaged over {} step(s) on "
      "{} device(s)):\n",
      shown, ops.size(), steps, devices);
  size_t width = 40;  // the longest name shown, at least 40
  for (size_t i = 0; i < shown; ++i) width = std::max(width, ops[i].name.size());
  out += fmt::format("  {:<{}} {:<24} {:>10} {:>12}\n", "op", width, "category", "ms/step",
                     "runs/step");
  for (size_t i = 0; i < shown; ++i) {
    const ProfileOp& op = ops[i];
    out += fmt::format("  {:<{}} {:<24} {:>10.3f} {:>12.2f}\n", op.name, width,
                       op.category.empty() ? "-" : op.category, seconds_per_step(op) * 1e3,
                       static_cast<double>(op.executions) / static_cast<double>(steps) /
                           static_cast<double>(std::max(1, devices)));
  }
  return out;
}

nlohmann::ordered_json OpProfile::to_json() const {
  nlohmann::ordered_json j;
  j["path"] = path;
  j["device"] = device;
  j["devices"] = devices;
  j["steps"] = steps;
  j["step_seconds"] = step_ps * 1e-12;
  j["peak_teraflops_per_second"] = peak_teraflops_per_second;
  j["peak_hbm_gigabytes_per_second"] = peak_hbm_gigabytes_per_second;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ProfileOp& op : ops) {
    list.push_back({{"name", op.name},
                    {"category", op.category},
                    {"executions", op.executions},
                    {"seconds_per_step", seconds_per_step(op)},
                    {"flops", op.flops},
                    {"bytes_accessed", op.bytes_accessed}});
  }
  j["ops"] = std::move(list);
  return j;
}

}  // namespace tpusim::traces
