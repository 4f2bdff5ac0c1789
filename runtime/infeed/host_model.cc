#include "runtime/infeed/host_model.h"

#include <algorithm>

namespace tpusim::runtime {

HostPipelineModel::HostPipelineModel(std::vector<HostStage> stages, uint32_t cpu_cores,
                                     uint32_t prefetch_depth)
    : stages_(std::move(stages)),
      cpu_cores_(std::max<uint32_t>(cpu_cores, 1)),
      prefetch_depth_(prefetch_depth),
      done_(stages_.size(), 0.0),
      busy_(stages_.size(), 0.0) {
  double all_threads = 0;
  for (HostStage& s : stages_) {
    s.threads = std::max<uint32_t>(s.threads, 1);
    all_threads += s.threads;
  }
  const double share = std::min(1.0, static_cast<double>(cpu_cores_) / all_threads);
  for (const HostStage& s : stages_) effective_.push_back(s.threads * share);
}

double HostPipelineModel::add_batch(const std::vector<double>& cpu_seconds) {
  history_.push_back(cpu_seconds);
  StageSpans spans;
  double ready = 0;
  if (prefetch_depth_ == 0) {
    ready = ready_.empty() ? 0 : ready_.back();
    for (size_t i = 0; i < stages_.size(); ++i) {
      const double wall = (i < cpu_seconds.size() ? cpu_seconds[i] : 0) / effective_[i];
      busy_[i] += wall;
      spans.emplace_back(ready, ready + wall);
      ready += wall;
      done_[i] = ready;
    }
  } else {
    double upstream = 0;
    for (size_t i = 0; i < stages_.size(); ++i) {
      const double wall = (i < cpu_seconds.size() ? cpu_seconds[i] : 0) / effective_[i];
      busy_[i] += wall;
      done_[i] = std::max(upstream, done_[i]) + wall;
      spans.emplace_back(done_[i] - wall, done_[i]);
      upstream = done_[i];
    }
    ready = upstream;
  }
  ready_.push_back(ready);
  if (record_spans_) spans_.push_back(std::move(spans));
  return ready;
}

size_t HostPipelineModel::busiest_stage() const {
  return static_cast<size_t>(std::max_element(busy_.begin(), busy_.end()) - busy_.begin());
}

HostPipelineModel HostPipelineModel::with_threads(size_t stage, uint32_t threads) const {
  std::vector<HostStage> stages = stages_;
  stages[stage].threads = threads;
  HostPipelineModel replay(std::move(stages), cpu_cores_, prefetch_depth_);
  for (const auto& batch : history_) replay.add_batch(batch);
  return replay;
}

std::vector<HostStage> standard_stages(uint32_t read_threads, uint32_t map_threads) {
  return {{"read", read_threads}, {"map", map_threads}, {"batch", 1}, {"enqueue", 1}};
}

std::vector<double> standard_stage_seconds(const config::HostStageCostsSpec& costs,
                                           const ExampleWork& e, uint64_t batch_size) {
  const auto n = static_cast<double>(batch_size);
  const double read = costs.file_read_s_per_byte * static_cast<double>(e.record_bytes);
  const double map = (e.parse_example ? costs.parse_example_s : 0) +
                     costs.decode_raw_s_per_byte * static_cast<double>(e.raw_bytes) +
                     costs.decode_jpeg_s_per_pixel * static_cast<double>(e.jpeg_pixels) +
                     costs.resize_s_per_pixel * static_cast<double>(e.resized_pixels) +
                     costs.augment_s_per_pixel * static_cast<double>(e.augmented_pixels);
  const double batch = costs.batch_s_per_byte * static_cast<double>(e.batch_bytes);
  const double enqueue = costs.enqueue_s_per_byte * static_cast<double>(e.batch_bytes);
  return {read * n, map * n, batch * n, enqueue * n};
}

}  // namespace tpusim::runtime
