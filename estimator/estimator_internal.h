#pragma once
// Shared by the estimator's sources (estimator.cc, estimator_train.cc, estimator_serve.cc): the
// pieces train, evaluate and predict all use. Not part of the API.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "configs/slice_spec.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/train_trace.h"
#include "runtime/infeed/infeed_driver.h"

namespace tpusim::estimator::internal {

// input_fn(params), with std::bad_alloc (an input_fn that builds its batches eagerly, as
// Dataset::from_elements does, asked for one too big for the host) as ResourceExhausted naming
// the batch size, instead of an unnamed internal error; nothing else is caught.
absl::StatusOr<runtime::data::DatasetPtr> call_input_fn(const InputFn& input_fn,
                                                        const Params& params);

// A dataset over an iterator whose first element was already read (to learn the shapes the
// graph's infeeds take); its one iterator yields that element, then the rest.
runtime::data::DatasetPtr peeked(runtime::data::Element first,
                                 std::unique_ptr<runtime::data::Iterator> rest);

// Variables the optimizer trains: not batch-norm statistics, not the step counter.
bool trained(const std::string& variable);
// Optimizer state and the step counter, which a warm start leaves fresh.
bool optimizer_state(const std::string& variable);

// Infeeds shaped like one per-shard batch: "label" is the labels, the rest the features (and
// "mask", a predict batch's padding marker, neither). The float components named in `bf16` are
// bf16 infeeds, widened to f32 for the model_fn (SimulatorOptions::bf16_infeeds); a name the batch
// lacks, or one of an int64 component, is an error naming it.
absl::Status build_infeeds(runtime::GraphBuilder& b, const runtime::data::Element& first,
                           const std::set<std::string>& bf16, Features* features,
                           std::optional<runtime::Value>* labels);

// The checkpoint's value for every variable of `variables`; errors name the missing or
// mismatched one.
absl::Status restore(const Checkpoint& ckpt, runtime::Variables* variables);

// Stacks tensors of equal trailing shape along dimension 0.
runtime::HostTensor stack(const std::vector<const runtime::HostTensor*>& parts);

// The host side of the slice the backend simulates (or of this machine, for cpu).
struct HostSide {
  uint32_t hosts = 1;
  uint32_t cpu_cores = 1;
  double loop_overhead_s = 0;
  config::HostStageCostsSpec costs;
  // The simulated device, for a profile (none on a backend that runs no slice).
  std::string device_type;  // "TPU v3"
  uint32_t cores_per_chip = 1;
  double core_peak_flops = 0;       // one TensorCore's bf16 peak
  double core_hbm_bytes_per_s = 0;  // one TensorCore's share of its chip's HBM bandwidth
};
absl::StatusOr<HostSide> host_side(const SimulatorOptions& sim);

// The infeed timing of a run whose per-shard batches are `per_shard_batch` examples: the host
// side's cores, a prefetch depth of 2, and in kHostConfig mode the standard stages charged
// from the host config (else the pipeline's profiled stages are measured).
runtime::HostTiming infeed_timing(const SimulatorOptions& sim, const HostSide& host,
                                  int64_t per_shard_batch);

// The XProf profile's request (SimulatorOptions::profile; a request of no path without it):
// MODEL_DIR/plugins/profile/RUN/tpusim-host0.xplane.pb, RUN the UTC time as TensorFlow's profiler
// names its runs; the device's figures from `host`; the module `program` ("train_step"); the
// first batch feeding step `first_step`, each step taking `shards` / `pipelines` batches of a
// pipeline.
TraceRequest::Profile profile_request(const SimulatorOptions& sim, const RunConfig& config,
                                      const HostSide& host, uint32_t shards, uint32_t pipelines,
                                      int64_t first_step, const std::string& program);

}  // namespace tpusim::estimator::internal
