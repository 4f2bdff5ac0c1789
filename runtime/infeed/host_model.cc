#include "runtime/infeed/host_model.h"

#include <algorithm>
#include <cmath>

namespace tpusim::runtime {

HostPipelineModel::HostPipelineModel(std::vector<HostStage> stages, uint32_t cpu_cores,
                                     uint32_t prefetch_depth)
    : stages_(std::move(stages)),
      cpu_cores_(std::max<uint32_t>(cpu_cores, 1)),
      prefetch_depth_(prefetch_depth),
      start_(stages_.size(), 0.0),
      left_(stages_.size(), 0.0),
      busy_(stages_.size(), 0.0) {
  double all_threads = 0;
  for (HostStage& s : stages_) {
    s.threads = std::max<uint32_t>(s.threads, 1);
    all_threads += s.threads;
  }
  const double share = std::min(1.0, static_cast<double>(cpu_cores_) / all_threads);
  for (const HostStage& s : stages_) effective_.push_back(s.threads * share);
}

uint64_t HostPipelineModel::push(std::vector<double> cpu_seconds) {
  const uint64_t k = history_.size();
  history_.push_back(std::move(cpu_seconds));
  for (size_t i = 0; i < stages_.size(); ++i) busy_[i] += wall(i, k);
  return k;
}

double HostPipelineModel::wall(size_t stage, uint64_t k) const {
  const std::vector<double>& cost = history_[k];
  return (stage < cost.size() ? cost[stage] : 0) / effective_[stage];
}

void HostPipelineModel::set_taken(uint64_t k, double seconds) {
  if (taken_.size() <= k) taken_.resize(k + 1, std::nan(""));
  taken_[k] = seconds;
}

double HostPipelineModel::taken_or_ready(uint64_t k) const {
  return k < taken_.size() && !std::isnan(taken_[k]) ? taken_[k] : ready_[k];
}

void HostPipelineModel::work_out_next() {
  const uint64_t k = ready_.size();
  StageSpans spans;
  double ready = 0;
  if (prefetch_depth_ == 0) {
    ready = k == 0 ? 0 : std::max(ready_[k - 1], taken_or_ready(k - 1));
    for (size_t i = 0; i < stages_.size(); ++i) {
      spans.emplace_back(ready, ready + wall(i, k));
      ready += wall(i, k);
    }
  } else {
    double upstream = 0;  // when batch k left the stage before
    for (size_t i = 0; i < stages_.size(); ++i) {
      const double start = std::max(upstream, left_[i]);
      const double finish = start + wall(i, k);
      // Room to hand it on: the slot in front of the next stage is free once that stage started
      // batch k-1 (start_ still holds it); the buffer has room once batch k-D was taken.
      double room = 0;
      if (i + 1 < stages_.size()) {
        room = k == 0 ? 0 : start_[i + 1];
      } else if (k >= prefetch_depth_) {
        room = taken_or_ready(k - prefetch_depth_);
      }
      start_[i] = start;
      left_[i] = std::max(finish, room);
      spans.emplace_back(start, finish);
      upstream = left_[i];
    }
    ready = upstream;
  }
  ready_.push_back(ready);
  if (record_spans_) spans_.push_back(std::move(spans));
}

double HostPipelineModel::ready(uint64_t k) {
  while (ready_.size() <= k && ready_.size() < history_.size()) work_out_next();
  return k < ready_.size() ? ready_[k] : last_ready_seconds();
}

void HostPipelineModel::settle() {
  if (!history_.empty()) ready(history_.size() - 1);
}

double HostPipelineModel::add_batch(const std::vector<double>& cpu_seconds) {
  return ready(push(cpu_seconds));
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

std::vector<HostStage> standard_stages(uint32_t read_threads, uint32_t map_threads,
                                       uint32_t batch_threads, uint32_t enqueue_threads) {
  return {{"read", read_threads},
          {"map", map_threads},
          {"batch", batch_threads},
          {"enqueue", enqueue_threads}};
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
