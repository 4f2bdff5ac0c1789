#pragma once
// The host side of an infeed driver's loops as a HostSchedule: one HostPipelineModel per input
// pipeline, each step made of `batches_per_step` batches of every pipeline (one, or one per
// replica the pipeline deals to). A step is ready when the last of its batches is, and taking a
// step takes all of them. With the pipelines spread evenly over several hosts (a whole number
// each, in order), each host's part of a step is its pipelines' batches, ready when the last of
// them is and taken on its own. Host time 0, every pipeline's start, is the device time the
// first loop began at.

#include <cstdint>
#include <vector>

#include "runtime/backend/host_schedule.h"
#include "runtime/infeed/host_model.h"

namespace tpusim::runtime {

class HostTimeline final : public HostSchedule {
 public:
  HostTimeline(std::vector<HostPipelineModel> models, uint32_t batches_per_step,
               uint32_t hosts = 1);

  // Anchors host time 0 at device time `seconds`; only the first call counts.
  void start_at(double seconds);
  // Every model has been pushed the next step's batches; returns the step's number.
  uint64_t add_step() { return steps_++; }

  double ready_seconds(uint64_t step) override;
  void taken(uint64_t step, double seconds) override;
  // The hosts the pipelines split over evenly; 1 when they do not (fewer pipelines than hosts).
  uint32_t hosts() const override { return hosts_; }
  double host_ready_seconds(uint64_t step, uint32_t host) override;
  void host_taken(uint64_t step, uint32_t host, double seconds) override;
  // Works out every step's times (what a backend that does not simulate time leaves undone).
  void settle();

  std::vector<HostPipelineModel>& models() { return models_; }
  const std::vector<HostPipelineModel>& models() const { return models_; }
  double origin_seconds() const { return origin_; }

 private:
  // ready_seconds and taken over pipelines [first, last).
  double ready_over(uint64_t step, size_t first, size_t last);
  void taken_over(uint64_t step, size_t first, size_t last, double seconds);

  std::vector<HostPipelineModel> models_;
  uint32_t batches_per_step_;
  uint32_t hosts_ = 1;
  uint64_t steps_ = 0;
  double origin_ = 0;
  bool started_ = false;
};

}  // namespace tpusim::runtime
