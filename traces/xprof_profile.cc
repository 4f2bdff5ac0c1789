#include "traces/xprof_profile.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "common/strings.h"
#include "traces/xplane_builder.h"

namespace tpusim::traces {
namespace {

constexpr int64_t kProgramId = 1;
constexpr int64_t kStepsLine = 1, kModulesLine = 2, kOpsLine = 3;
constexpr std::string_view kEnqueueStage = "enqueue";
// TensorFlow's name for the TPU infeed's host op, as "name:type" (XProf takes an event for a
// framework op only in that form, and an InfeedEnqueue type as the host's enqueue).
constexpr std::string_view kInfeedEnqueue = "InfeedEnqueueTuple:InfeedEnqueueTuple";

// "cross_replica_sum" -> "CrossReplicaSum": the op's type as TensorFlow would name it.
std::string camel_case(const std::string& snake) {
  std::string out;
  bool upper = true;
  for (const char c : snake) {
    if (c == '_' || c == ' ') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

// One op execution on the "XLA Ops" line.
struct OpEvent {
  uint32_t op = 0;
  int64_t step = 0;
  XprofSpan span;
};

// Each infeed op run starts at the wait before it: the first wait that ends at or before its
// start and after the previous infeed run's start.
void extend_infeeds_over_waits(const XprofProfile& p, const std::vector<XprofSpan>& waits,
                               std::vector<OpEvent>* events) {
  std::vector<OpEvent*> infeeds;
  for (OpEvent& e : *events) {
    if (p.ops[e.op].kind == "infeed") infeeds.push_back(&e);
  }
  std::sort(infeeds.begin(), infeeds.end(),
            [](const OpEvent* a, const OpEvent* b) { return a->span.start < b->span.start; });
  size_t w = 0;
  TimePs previous = 0;
  for (OpEvent* e : infeeds) {
    while (w < waits.size() && waits[w].start < previous) ++w;
    TimePs start = e->span.start;
    while (w < waits.size() && waits[w].end <= e->span.start)
      start = std::min(start, waits[w++].start);
    previous = e->span.start;
    e->span.start = start;
  }
}

// A core's op runs as a line XProf reads: sorted by start (the longer first on a tie), and
// nested or disjoint. tpusim's ops overlap where the next op's first instructions (its DMAs)
// start under this one's compute; an op is cut where an op that outlasts it begins, so that
// every instant belongs to the innermost op running then, as on a TPU's op line, and each op
// keeps its start. An op inside another stays nested (XProf counts its time as the outer op's
// child, not the outer op's self time).
std::vector<OpEvent> op_line(const XprofProfile& p, const XprofCore& core) {
  std::vector<OpEvent> events;
  events.reserve(core.ops.size());
  for (const XprofOpRun& r : core.ops) events.push_back({r.op, r.step, r.span});
  extend_infeeds_over_waits(p, core.infeed_waits, &events);
  std::sort(events.begin(), events.end(), [](const OpEvent& a, const OpEvent& b) {
    if (a.span.start != b.span.start) return a.span.start < b.span.start;
    if (a.span.end != b.span.end) return a.span.end > b.span.end;
    return a.op < b.op;
  });
  std::vector<size_t> open;
  for (size_t i = 0; i < events.size(); ++i) {
    const XprofSpan& e = events[i].span;
    while (!open.empty()) {
      XprofSpan& top = events[open.back()].span;
      if (top.end <= e.start) {
        open.pop_back();
      } else if (e.end <= top.end) {
        break;  // nested
      } else {
        top.end = e.start;  // overlaps past its end: cut where e begins
        open.pop_back();
      }
    }
    open.push_back(i);
  }
  return events;
}

void add_device_plane(const XprofProfile& p, const XprofCore& core, xprof::XPlane* plane) {
  XPlaneBuilder b(plane, core.ordinal, str_cat("/device:TPU:", core.ordinal));
  b.add_str(plane->mutable_stats(), "device_type_string", p.device_type);
  b.add_double(plane->mutable_stats(), "peak_teraflops_per_second", p.peak_teraflops_per_second);
  b.add_double(plane->mutable_stats(), "peak_hbm_bw_gigabytes_per_second",
               p.peak_hbm_gigabytes_per_second);

  xprof::XLine* steps = b.add_line(kStepsLine, "Steps");
  xprof::XLine* modules = b.add_line(kModulesLine, "XLA Modules");
  const std::string module_name = str_cat(p.program, "(", kProgramId, ")");
  for (const auto& [step, span] : core.steps) {
    xprof::XEvent* e = b.add_event(steps, b.event_metadata(str_cat(step)), span.start, span.end);
    b.add_int(e->mutable_stats(), "group_id", step);
    b.add_int(e->mutable_stats(), "step_num", step);
    xprof::XEventMetadata& m = b.event_metadata(module_name);
    if (m.stats_size() == 0) b.add_int(m.mutable_stats(), "program_id", kProgramId);
    xprof::XEvent* run = b.add_event(modules, m, span.start, span.end);
    b.add_int(run->mutable_stats(), "program_id", kProgramId);
    b.add_int(run->mutable_stats(), "group_id", step);
  }

  xprof::XLine* ops = b.add_line(kOpsLine, "XLA Ops");
  for (const OpEvent& e : op_line(p, core)) {
    const XprofOp& op = p.ops[e.op];
    xprof::XEventMetadata& m = b.event_metadata(op.name);
    if (m.stats_size() == 0) {
      m.set_display_name(op.name);
      b.add_int(m.mutable_stats(), "program_id", kProgramId);
      b.add_int(m.mutable_stats(), "symbol_id", static_cast<int64_t>(e.op) + 1);
      b.add_str(m.mutable_stats(), "hlo_category", xla_category(op.kind));
      b.add_int(m.mutable_stats(), "flops", op.flops);
      b.add_int(m.mutable_stats(), "bytes_accessed", op.bytes_accessed);
      b.add_str(m.mutable_stats(), "tf_op", str_cat(op.name, ":", camel_case(op.kind)));
    }
    xprof::XEvent* event = b.add_event(ops, m, e.span.start, e.span.end);
    b.add_int(event->mutable_stats(), "group_id", e.step);
  }
}

// The lines of one stage: its batches, spread over as many lines as overlap needs (a stage on
// several threads runs batches at once; XProf drops events that overlap on a line unnested).
void add_stage_lines(XPlaneBuilder& b, const XprofHostStage& stage, const std::string& event_name,
                     int64_t* next_line_id) {
  std::vector<XprofHostStage::Batch> batches = stage.batches;
  std::sort(batches.begin(), batches.end(),
            [](const auto& x, const auto& y) { return x.span.start < y.span.start; });
  std::vector<std::pair<xprof::XLine*, TimePs>> lines;  // line, its last event's end
  for (const XprofHostStage::Batch& batch : batches) {
    auto free = std::find_if(lines.begin(), lines.end(),
                             [&](const auto& l) { return l.second <= batch.span.start; });
    if (free == lines.end()) {
      const std::string name = str_cat(stage.name, " thread ", lines.size());
      lines.emplace_back(b.add_line((*next_line_id)++, name), 0);
      free = lines.end() - 1;
    }
    xprof::XEvent* e =
        b.add_event(free->first, b.event_metadata(event_name), batch.span.start, batch.span.end);
    b.add_int(e->mutable_stats(), "group_id", batch.step);
    free->second = batch.span.end;
  }
}

void add_host_plane(const XprofProfile& p, int64_t id, xprof::XPlane* plane) {
  XPlaneBuilder b(plane, id, "/host:CPU");
  b.stat_id("group_id");  // declared on every plane: XProf then takes the profile as grouped
  int64_t next_line = 1;
  for (size_t i = 0; i < p.host_stages.size(); ++i) {
    const XprofHostStage& stage = p.host_stages[i];
    const std::string name =
        stage.name == kEnqueueStage ? std::string(kInfeedEnqueue) : iterator_name(p.host_stages, i);
    add_stage_lines(b, stage, name, &next_line);
  }
}

}  // namespace

std::string xla_category(const std::string& kind) {
  static const std::map<std::string, std::string, std::less<>> kCategories = {
      {"matmul", "convolution"},  // XLA lowers a TPU matmul to a convolution
      {"fused", "loop fusion"},   // elementwise nodes computed together
      // The compiler's convolution fusions: a convolution (or its gradient) with the
      // elementwise producers and consumers it computes tile by tile, XLA's TPU convolution
      // fusion.
      {"conv2d", "convolution fusion"},
      {"conv2d_backprop_input", "convolution fusion"},
      {"conv2d_backprop_filter", "convolution fusion"},
      {"max_pool", "reduce-window"},            // XLA's max pool
      {"max_pool_grad", "select-and-scatter"},  // and its gradient
      {"outfeed", "outfeed"},
      {"cross_replica_sum", "all-reduce"},
      {"infeed", "infeed"},
      {"reduce_sum", "reduce"},
      {"reduce_max", "reduce"},
      {"argmax", "reduce"},
      {"transpose", "transpose"},
      {"reshape", "reshape"},
      {"broadcast", "broadcast"},
      {"concat", "concatenate"},
      {"slice", "slice"},
      {"pad", "pad"},
      {"gather", "gather"},
      {"scatter_add", "scatter"},
      {"extract_patches", "loop fusion"},
      {"patches_to_image", "loop fusion"},
      {"one_hot", "loop fusion"},
      {"rng_uniform", "rng"},
      {"constant", "constant"},
  };
  if (auto it = kCategories.find(kind); it != kCategories.end()) return it->second;
  return "non-fusion elementwise";
}

std::string iterator_name(const std::vector<XprofHostStage>& stages, size_t i) {
  std::string name = "Iterator::Root::Prefetch";
  size_t last = stages.size();
  while (last > 0 && stages[last - 1].name == kEnqueueStage) --last;
  for (size_t j = last; j-- > i;) {
    // tpusim reads TFRecord files in its source stage: tf.data's TFRecordDataset.
    const bool source = j == 0 && stages[j].name == "read";
    name += "::" + (source ? std::string("TFRecord") : camel_case(stages[j].name));
  }
  return name;
}

xprof::XSpace to_xspace(const XprofProfile& profile) {
  xprof::XSpace space;
  for (const XprofCore& core : profile.cores) add_device_plane(profile, core, space.add_planes());
  uint32_t host_id = 0;
  for (const XprofCore& core : profile.cores) host_id = std::max(host_id, core.ordinal + 1);
  add_host_plane(profile, host_id, space.add_planes());
  space.add_hostnames(profile.host);
  return space;
}

absl::Status write_xspace(const XprofProfile& profile, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::FailedPreconditionError(
        str_cat("cannot create ", dir.string(), ": ", ec.message()));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::FailedPreconditionError(str_cat("cannot write ", path));
  if (!to_xspace(profile).SerializeToOstream(&out) || !out.flush())
    return absl::DataLossError(str_cat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace tpusim::traces
