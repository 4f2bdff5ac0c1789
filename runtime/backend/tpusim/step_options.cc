// CompileOptions -> StepOptions: the one place the tpusim compiler reads a backend's options.
#include "runtime/backend/tpusim/compiler.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

isa::Collective::Algorithm isa_algorithm(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kBidirRing:
      return isa::Collective::BIDIR_RING;
    case AllReduceAlgorithm::kTorus2d:
      return isa::Collective::TORUS_2D;
    case AllReduceAlgorithm::kTorus:
      return isa::Collective::TORUS;
    case AllReduceAlgorithm::kRing:
      break;
  }
  return isa::Collective::RING;
}

}  // namespace

StepOptions step_options_from(const CompileOptions& options) {
  StepOptions step;
  step.replicas = options.replicas;
  step.allreduce = isa_algorithm(options.allreduce);
  step.overlap_allreduce = options.overlap_allreduce;
  step.combine.threshold_bytes = options.allreduce_combine_bytes;
  step.fuse_convolutions = options.fuse_convolutions;
  step.fuse_pools = options.fuse_pools;
  step.fuse_reductions = options.fuse_reductions;
  step.recompute_shared_producers = options.recompute_shared_producers;
  step.fuse_multi_output = options.fuse_multi_output;
  step.fuse_producers = options.fuse_producers;
  step.fuse_conv_reductions = options.fuse_conv_reductions;
  step.fuse_pointwise_convolutions = options.fuse_pointwise_convolutions;
  step.fuse_conv_producers = options.fuse_conv_producers;
  step.fuse_matmul_producers = options.fuse_matmul_producers;
  step.fuse_matmul_consumers = options.fuse_matmul_consumers;
  step.fuse_conv_consumers = options.fuse_conv_consumers;
  step.fuse_conv_windows = options.fuse_conv_windows;
  step.fuse_rng = options.fuse_rng;
  return step;
}

}  // namespace tpusim::runtime::tpusim_backend
