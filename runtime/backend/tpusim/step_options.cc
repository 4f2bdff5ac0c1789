// CompileOptions -> StepOptions: the one place the tpusim compiler reads a backend's options.
#include "runtime/backend/tpusim/compiler.h"
#include "sim/isa/ops.h"

namespace tpusim::runtime::tpusim_backend {

StepOptions step_options_from(const CompileOptions& options) {
  StepOptions step;
  step.replicas = options.replicas;
  sim::collective_algorithm_named(options.allreduce, &step.allreduce);
  step.overlap_allreduce = options.overlap_allreduce;
  step.combine.threshold_bytes = options.allreduce_combine_bytes;
  step.fuse_convolutions = options.fuse_convolutions;
  step.fuse_pools = options.fuse_pools;
  step.fuse_reductions = options.fuse_reductions;
  step.recompute_shared_producers = options.recompute_shared_producers;
  return step;
}

}  // namespace tpusim::runtime::tpusim_backend
