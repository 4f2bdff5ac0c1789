#pragma once
// MXU timing policies: when a weight load or a matmul can start on a R x C systolic array and
// when its results are out. A policy holds the array's pipeline state; the MXU unit owns one
// per MXU. Policies register by name (make_mxu_policy) so the CLI and configs can pick them.
//
// `tpu` (weights double-buffered, chains pipelined):
//   load_weights(slot): starts once the weight path is free and the slot's previous tile has
//     finished streaming; takes R cycles (weights shift in through the R rows).
//   matmul(slot, T rows, p passes): starts once its weights are in and the array input is
//     free; streams p x T cycles; results are out R + C - 2 cycles after the last row entered
//     (fill and drain). The next matmul streams right behind it, so a chain of n matmuls whose
//     weight loads hide behind streaming (p x T >= R) costs
//       R + sum_i(p_i x T_i) + R + C - 2 cycles.
//
// `scalesim_ws` (SCALE-Sim v2's weight-stationary model): nothing overlaps. A weight load starts
//   when the previous matmul's results are out and takes R cycles; the matmul then takes
//   T + R + C - 2 cycles: 2R + C + T - 2 per fold, as SCALE-Sim counts it.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/named_values.h"

namespace tpusim::sim {

struct WeightLoadTiming {
  uint64_t start = 0;  // cycle the load begins
  uint64_t ready = 0;  // cycle from which a matmul may use the weights
};

struct MatmulTiming {
  uint64_t start = 0;       // cycle the first row enters the array
  uint64_t stream_end = 0;  // cycle after the last row entered
  uint64_t done = 0;        // cycle after the last result left the array
};

class MxuTimingPolicy {
 public:
  virtual ~MxuTimingPolicy() = default;
  virtual std::string_view name() const = 0;
  // `now`: the earliest cycle the instruction may begin (it reached the head of the MXU's queue
  // and its sync flags hold).
  virtual WeightLoadTiming load_weights(uint64_t now, uint32_t slot) = 0;
  virtual MatmulTiming matmul(uint64_t now, uint32_t slot, uint64_t stream_cycles) = 0;
  // The last matmul's input stalled (VMEM could not feed it) until `until`: everything after it
  // moves back. Returns the matmul's new done cycle.
  virtual uint64_t stall_last_stream(uint64_t until) = 0;
};

// The timing policies: kTpu ("tpu": weights double-buffered, the next tile's loaded while the
// current one streams) and kScaleSimWs ("scalesim_ws": SCALE-Sim v2's weight-stationary folds,
// which never overlap). The words are what the CLI and reports call them.
enum class MxuPolicy { kTpu, kScaleSimWs };
inline constexpr NamedValues<MxuPolicy, 2> kMxuPolicies{
    {{{MxuPolicy::kTpu, "tpu"}, {MxuPolicy::kScaleSimWs, "scalesim_ws"}}}};

// The policy `policy` for an array of rows x cols.
std::unique_ptr<MxuTimingPolicy> make_mxu_policy(MxuPolicy policy, uint32_t rows, uint32_t cols);

}  // namespace tpusim::sim
