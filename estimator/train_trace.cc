#include "estimator/train_trace.h"

#include <algorithm>

#include "common/strings.h"

namespace tpusim::estimator {
namespace {

// A host timeline's time (`seconds` after its `origin`, both in seconds) in trace picoseconds.
traces::TimePs host_ps(double origin, double seconds) {
  return static_cast<traces::TimePs>((origin + seconds) * 1e12 + 0.5);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainTrace>> TrainTrace::start(
    const TraceRequest& request, runtime::InfeedDriver& driver,
    std::function<void(int64_t)> on_step) {
  std::unique_ptr<TrainTrace> t(new TrainTrace());
  t->request_ = request;
  t->analysis_.keep_only_analysis_events();
  t->tee_.add(&t->analysis_);
  if (on_step) {
    t->step_watch_ = std::make_unique<traces::StepWatchSink>(std::move(on_step));
    t->tee_.add(t->step_watch_.get());
  }
  if (!request.path.empty()) {
    auto writer = traces::open_trace_writer(request.path);
    if (!writer.ok()) return writer.status();
    t->writer_ = *std::move(writer);
    traces::Sink* file = t->writer_.get();
    if (request.counter_window > 0) {
      t->binning_ = std::make_unique<traces::CounterBinningSink>(file, request.counter_window);
      file = t->binning_.get();
    }
    t->file_output_ = t->tee_.add(file);
    t->tee_.set_enabled(t->file_output_, false);
  }
  if (!request.profile.path.empty()) {
    t->profile_device_ = std::make_unique<traces::XprofDeviceSink>(request.profile.cores_per_chip);
    t->profile_output_ = t->tee_.add(t->profile_device_.get());
    t->tee_.set_enabled(t->profile_output_, false);
    t->profile_ = request.profile.header;
  }
  traces::TraceRouter& router = runtime::device_trace_router();
  router.attach(&t->tee_);
  t->attached_ = true;
  auto& models = driver.host_models();
  for (size_t p = 0; p < models.size(); ++p) {
    models[p].record_spans(true);
    std::vector<traces::TrackId> tracks;
    for (const runtime::HostStage& s : models[p].stages()) {
      traces::TrackInfo info;
      info.kind = traces::TrackInfo::Kind::kHost;
      info.name = p == 0 ? s.name : str_cat(s.name, "@host", p);
      info.threads = s.threads;
      tracks.push_back(router.declare_track(info));
    }
    t->stage_tracks_.push_back(std::move(tracks));
  }
  return t;
}

TrainTrace::~TrainTrace() {
  if (attached_) runtime::device_trace_router().detach();
}

void TrainTrace::before_loop(int64_t first, int64_t last) {
  loop_steps_ = {first, last};
  if (writer_ != nullptr)
    tee_.set_enabled(file_output_, last >= request_.first_step && first <= request_.last_step);
  if (profiling()) {
    profile_loop_ = last >= request_.profile.first_step && first <= request_.profile.last_step;
    tee_.set_enabled(profile_output_, profile_loop_);
  }
}

void TrainTrace::after_loop(runtime::InfeedDriver& driver, const runtime::DeviceTiming& timing) {
  if (profile_loop_) profile_ops(timing);
  traces::TraceRouter& router = runtime::device_trace_router();
  driver.host_timeline().settle();  // a backend that does not simulate time asked for nothing
  const double origin = driver.host_timeline().origin_seconds();
  auto& models = driver.host_models();
  for (size_t p = 0; p < models.size() && p < stage_tracks_.size(); ++p) {
    const std::vector<runtime::HostPipelineModel::StageSpans> spans = models[p].take_spans();
    if (profiling()) profile_host_stages(p, spans, models[p].stages(), origin);
    for (const auto& batch : spans) {
      for (size_t i = 0; i < batch.size() && i < stage_tracks_[p].size(); ++i) {
        router.slice(stage_tracks_[p][i], "batch", host_ps(origin, batch[i].first),
                     host_ps(origin, batch[i].second));
      }
    }
  }
}

void TrainTrace::profile_host_stages(
    size_t pipeline, const std::vector<runtime::HostPipelineModel::StageSpans>& batches,
    const std::vector<runtime::HostStage>& stages, double origin) {
  if (profile_batches_.size() <= pipeline) profile_batches_.resize(pipeline + 1, 0);
  // The profile shows the first host's pipeline, as a profile of one host's job does.
  if (pipeline != 0) {
    profile_batches_[pipeline] += batches.size();
    return;
  }
  if (profile_.host_stages.empty()) {
    for (const runtime::HostStage& s : stages)
      profile_.host_stages.push_back({s.name, s.threads, {}});
  }
  for (const auto& batch : batches) {
    const int64_t step = request_.profile.first_global_step +
                         static_cast<int64_t>(profile_batches_[0]++ /
                                              std::max(1u, request_.profile.batches_per_step));
    if (step < request_.profile.first_step || step > request_.profile.last_step) continue;
    for (size_t i = 0; i < batch.size() && i < profile_.host_stages.size(); ++i)
      profile_.host_stages[i].batches.push_back(
          {step, {host_ps(origin, batch[i].first), host_ps(origin, batch[i].second)}});
  }
}

traces::XprofCore* TrainTrace::profile_core(uint32_t ordinal) {
  for (traces::XprofCore& c : profile_.cores) {
    if (c.ordinal == ordinal) return &c;
  }
  traces::XprofCore& added = profile_.cores.emplace_back();
  added.ordinal = ordinal;
  return &added;
}

void TrainTrace::profile_ops(const runtime::DeviceTiming& timing) {
  for (const runtime::CoreOpSpans& core : timing.core_ops) {
    traces::XprofCore* c = profile_core(core.core);
    for (size_t i = 0; i < core.ops.size() && i < core.spans.size(); ++i) {
      const runtime::OpTiming& op = core.ops[i];
      if (core.spans[i].empty()) continue;
      auto [it, added] = profile_op_index_.try_emplace({op.label, op.op},
                                                       static_cast<uint32_t>(profile_.ops.size()));
      if (added) {
        // Per execution: the loop's figures over the steps the op ran in on this core.
        const double runs = static_cast<double>(core.spans[i].size());
        profile_.ops.push_back({op.label, op.op, static_cast<int64_t>(op.flops / runs + 0.5),
                                static_cast<int64_t>(op.hbm_bytes / runs + 0.5)});
      }
      for (const runtime::CoreOpSpans::Span& s : core.spans[i]) {
        const auto step = static_cast<int64_t>(s.step);
        if (step < request_.profile.first_step || step > request_.profile.last_step) continue;
        c->ops.push_back({it->second, step, {s.start_ps, s.end_ps}});
      }
    }
  }
}

absl::Status TrainTrace::write_profile() {
  for (const auto& [ordinal, steps] : profile_device_->steps()) {
    traces::XprofCore* c = profile_core(ordinal);
    for (const auto& [step, span] : steps) {
      if (step >= request_.profile.first_step && step <= request_.profile.last_step)
        c->steps[step] = span;
    }
  }
  for (traces::XprofCore& c : profile_.cores) {
    const auto waits = profile_device_->infeed_waits().find(c.ordinal);
    if (waits != profile_device_->infeed_waits().end()) c.infeed_waits = waits->second;
  }
  std::sort(profile_.cores.begin(), profile_.cores.end(),
            [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
  return traces::write_xspace(profile_, request_.profile.path);
}

absl::StatusOr<std::optional<traces::Analysis>> TrainTrace::finish() {
  if (attached_) {
    runtime::device_trace_router().detach();
    attached_ = false;
  }
  if (writer_ != nullptr) {
    if (binning_ != nullptr) binning_->flush();
    if (auto s = writer_->close(); !s.ok()) return s;
  }
  if (profiling()) {
    if (auto s = write_profile(); !s.ok()) return s;
  }
  auto analysis = traces::analyze(analysis_);
  if (!analysis.ok()) return std::optional<traces::Analysis>();
  return std::optional<traces::Analysis>(*std::move(analysis));
}

}  // namespace tpusim::estimator
