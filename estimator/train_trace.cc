#include "estimator/train_trace.h"

#include "common/strings.h"

namespace tpusim::estimator {

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
  if (writer_ == nullptr) return;
  tee_.set_enabled(file_output_, last >= request_.first_step && first <= request_.last_step);
}

void TrainTrace::after_loop(runtime::InfeedDriver& driver) {
  traces::TraceRouter& router = runtime::device_trace_router();
  driver.host_timeline().settle();  // a backend that does not simulate time asked for nothing
  const double origin = driver.host_timeline().origin_seconds();
  auto& models = driver.host_models();
  for (size_t p = 0; p < models.size() && p < stage_tracks_.size(); ++p) {
    for (const auto& batch : models[p].take_spans()) {
      for (size_t i = 0; i < batch.size() && i < stage_tracks_[p].size(); ++i) {
        const auto at = [&](double s) {
          return static_cast<traces::TimePs>((origin + s) * 1e12 + 0.5);
        };
        router.slice(stage_tracks_[p][i], "batch", at(batch[i].first), at(batch[i].second));
      }
    }
  }
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
  auto analysis = traces::analyze(analysis_);
  if (!analysis.ok()) return std::optional<traces::Analysis>();
  return std::optional<traces::Analysis>(*std::move(analysis));
}

}  // namespace tpusim::estimator
