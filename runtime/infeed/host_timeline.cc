#include "runtime/infeed/host_timeline.h"

#include <algorithm>

namespace tpusim::runtime {

HostTimeline::HostTimeline(std::vector<HostPipelineModel> models, uint32_t batches_per_step)
    : models_(std::move(models)), batches_per_step_(std::max<uint32_t>(batches_per_step, 1)) {}

void HostTimeline::start_at(double seconds) {
  if (started_) return;
  origin_ = seconds;
  started_ = true;
}

double HostTimeline::ready_seconds(uint64_t step) {
  double ready = 0;
  for (HostPipelineModel& m : models_) {
    for (uint32_t j = 0; j < batches_per_step_; ++j)
      ready = std::max(ready, m.ready(step * batches_per_step_ + j));
  }
  return origin_ + ready;
}

void HostTimeline::taken(uint64_t step, double seconds) {
  for (HostPipelineModel& m : models_) {
    for (uint32_t j = 0; j < batches_per_step_; ++j)
      m.set_taken(step * batches_per_step_ + j, seconds - origin_);
  }
}

void HostTimeline::settle() {
  for (HostPipelineModel& m : models_) m.settle();
}

}  // namespace tpusim::runtime
