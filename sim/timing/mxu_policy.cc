#include "sim/timing/mxu_policy.h"

#include <algorithm>
#include <array>

namespace tpusim::sim {
namespace {

class TpuPolicy final : public MxuTimingPolicy {
 public:
  TpuPolicy(uint32_t rows, uint32_t cols) : rows_(rows), fill_drain_(rows + cols - 2) {}
  std::string_view name() const override { return "tpu"; }

  WeightLoadTiming load_weights(uint64_t now, uint32_t slot) override {
    const uint64_t start = std::max({now, weight_path_free_, slot_free_[slot]});
    const uint64_t ready = start + rows_;
    weight_path_free_ = ready;
    slot_ready_[slot] = ready;
    return {start, ready};
  }

  MatmulTiming matmul(uint64_t now, uint32_t slot, uint64_t stream_cycles) override {
    const uint64_t start = std::max({now, slot_ready_[slot], stream_free_});
    last_ = {start, start + stream_cycles, start + stream_cycles + fill_drain_};
    last_slot_ = slot;
    stream_free_ = last_.stream_end;
    slot_free_[slot] = last_.stream_end;
    return last_;
  }

  uint64_t stall_last_stream(uint64_t until) override {
    if (until > last_.stream_end) {
      last_.stream_end = until;
      last_.done = until + fill_drain_;
      stream_free_ = std::max(stream_free_, until);
      slot_free_[last_slot_] = std::max(slot_free_[last_slot_], until);
    }
    return last_.done;
  }

 private:
  uint64_t rows_;
  uint64_t fill_drain_;
  uint64_t weight_path_free_ = 0;
  uint64_t stream_free_ = 0;
  std::array<uint64_t, 2> slot_free_{};
  std::array<uint64_t, 2> slot_ready_{};
  MatmulTiming last_;
  uint32_t last_slot_ = 0;
};

class ScaleSimWsPolicy final : public MxuTimingPolicy {
 public:
  ScaleSimWsPolicy(uint32_t rows, uint32_t cols) : rows_(rows), fill_drain_(rows + cols - 2) {}
  std::string_view name() const override { return "scalesim_ws"; }

  WeightLoadTiming load_weights(uint64_t now, uint32_t slot) override {
    const uint64_t start = std::max(now, array_free_);
    const uint64_t ready = start + rows_;
    array_free_ = ready;
    slot_ready_[slot] = ready;
    return {start, ready};
  }

  MatmulTiming matmul(uint64_t now, uint32_t slot, uint64_t stream_cycles) override {
    const uint64_t start = std::max({now, slot_ready_[slot], array_free_});
    last_ = {start, start + stream_cycles, start + stream_cycles + fill_drain_};
    array_free_ = last_.done;
    return last_;
  }

  uint64_t stall_last_stream(uint64_t until) override {
    if (until > last_.stream_end) {
      last_.stream_end = until;
      last_.done = until + fill_drain_;
      array_free_ = std::max(array_free_, last_.done);
    }
    return last_.done;
  }

 private:
  uint64_t rows_;
  uint64_t fill_drain_;
  uint64_t array_free_ = 0;
  std::array<uint64_t, 2> slot_ready_{};
  MatmulTiming last_;
};

}  // namespace

std::unique_ptr<MxuTimingPolicy> make_mxu_policy(MxuPolicy policy, uint32_t rows, uint32_t cols) {
  if (policy == MxuPolicy::kScaleSimWs) return std::make_unique<ScaleSimWsPolicy>(rows, cols);
  return std::make_unique<TpuPolicy>(rows, cols);
}

}  // namespace tpusim::sim
