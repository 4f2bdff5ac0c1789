#include "runtime/infeed/host_timeline.h"

#include <algorithm>

namespace tpusim::runtime {

HostTimeline::HostTimeline(std::vector<HostPipelineModel> models, uint32_t batches_per_step,
                           uint32_t hosts)
    : models_(std::move(models)), batches_per_step_(std::max<uint32_t>(batches_per_step, 1)) {
  if (hosts > 1 && models_.size() >= hosts && models_.size() % hosts == 0) hosts_ = hosts;
}

void HostTimeline::start_at(double seconds) {
  if (started_) return;
  origin_ = seconds;
  started_ = true;
}

double HostTimeline::ready_over(uint64_t step, size_t first, size_t last) {
  double ready = 0;
  for (size_t p = first; p < last; ++p) {
    for (uint32_t j = 0; j < batches_per_step_; ++j)
      ready = std::max(ready, models_[p].ready(step * batches_per_step_ + j));
  }
  return origin_ + ready;
}

void HostTimeline::taken_over(uint64_t step, size_t first, size_t last, double seconds) {
  for (size_t p = first; p < last; ++p) {
    for (uint32_t j = 0; j < batches_per_step_; ++j)
      models_[p].set_taken(step * batches_per_step_ + j, seconds - origin_);
  }
}

double HostTimeline::ready_seconds(uint64_t step) { return ready_over(step, 0, models_.size()); }

void HostTimeline::taken(uint64_t step, double seconds) {
  taken_over(step, 0, models_.size(), seconds);
}

double HostTimeline::host_ready_seconds(uint64_t step, uint32_t host) {
  const size_t per_host = models_.size() / hosts_;
  return ready_over(step, std::min(models_.size(), host * per_host),
                    std::min(models_.size(), (host + 1) * per_host));
}

void HostTimeline::host_taken(uint64_t step, uint32_t host, double seconds) {
  const size_t per_host = models_.size() / hosts_;
  taken_over(step, std::min(models_.size(), host * per_host),
             std::min(models_.size(), (host + 1) * per_host), seconds);
}

void HostTimeline::settle() {
  for (HostPipelineModel& m : models_) m.settle();
}

}  // namespace tpusim::runtime
