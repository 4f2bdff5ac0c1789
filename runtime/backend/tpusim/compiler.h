#pragma once
// The tpusim compiler: lowers a graph to one core's ISA program. The program is a device loop
// whose body is one step: infeed dequeues into the infeeds' HBM buffers, every node's fragment
// in emission order (schedule.h), the variable updates, and outfeed enqueues of the outputs.
// Variables and constants live in HBM across steps; the host writes them before a run and reads
// variables back after it.

#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "runtime/backend/compile_options.h"
#include "runtime/backend/tpusim/allreduce_combiner.h"
#include "runtime/backend/tpusim/hbm_plan.h"
#include "runtime/graph/graph.h"
#include "sim/isa/arena_program.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::runtime::tpusim_backend {

// A tensor crossing the host link: its HBM buffer and the rows each feed entry carries.
struct Transfer {
  std::string name;
  int node = -1;
  uint64_t hbm = 0;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t rows_per_entry = 0;  // rows of the [rows, cols] view per infeed/outfeed entry
  uint32_t cols = 1;
  // Bytes per element on the host link: a bf16 infeed travels as bf16 (2) and is widened to the
  // f32 its HBM buffer holds as it lands in VMEM; everything else as 4-byte f32 or s32.
  uint32_t link_bytes = 4;
  uint64_t entry_bytes() const { return rows_per_entry * cols * link_bytes; }
};

struct CompiledStep {
  isa::ArenaProgram program;  // loop count and step base are set per run
  int loop_instruction = 0;
  HbmPlan plan;
  std::vector<Transfer> infeeds;
  std::vector<Transfer> outputs;
  std::vector<std::pair<uint64_t, std::vector<float>>>
      constants;          // HBM address -> values (graph and compiler)
  uint64_t hbm_base = 0;  // where the core's share of its chip's HBM starts
  // The device's footprint: the planned buffers (bf16 at 2 bytes) with each fragment's scratch
  // allocated beside them while it runs (PlanRequest::temporaries), and the constants region.
  uint64_t hbm_bytes = 0;
  std::vector<uint64_t> node_temporaries;  // per node, its fragment's scratch bytes
  std::map<std::string, uint64_t>
      instructions_per_op;          // graph op name -> instructions emitted for it
  uint64_t fused_nodes = 0;         // elementwise nodes computed inside a multi-node fused fragment
  uint64_t fused_convolutions = 0;  // convolution fragments whose patches stay in VMEM
  uint64_t fused_pools = 0;         // max pool fragments (forward or gradient) of one fragment
  uint64_t fused_reductions = 0;    // reductions computing their elementwise input in VMEM
  uint64_t recomputed_nodes = 0;    // elementwise nodes computed again in each reader's group
  uint64_t multi_output_fusions = 0;      // fragments computing two sibling reductions
  uint64_t producer_fusions = 0;          // groups written by the reductions of their value
  uint64_t reader_recomputed_groups = 0;  // groups recomputed by every fragment that reads them
  uint64_t conv_producers = 0;            // convolutions computing their images' group
  uint64_t matmul_producers = 0;          // batched matmuls making an operand from its group
  uint64_t matmul_consumers = 0;          // batched matmuls computing their consumer group
  uint64_t merged_products = 0;           // matmuls storing through a merge of heads or transpose
  uint64_t conv_consumers = 0;            // input gradients computing their consumer group
  uint64_t conv_output_reductions = 0;    // reductions computed by the convolution they reduce
  // Copies rematerialization added so that the step fits HBM (rematerialize.h); 0 for a step
  // that fits as planned.
  uint64_t rematerialized_nodes = 0;
  uint64_t combined_allreduces = 0;  // combined all-reduces (StepOptions::combine)
  uint64_t combined_sums = 0;        // the cross_replica_sums they stand for
};

struct StepOptions {
  isa::Precision precision = isa::DEFAULT;
  // With more than one, the step runs on cores 0 .. replicas-1 and cross_replica_sum is an
  // all-reduce over them with `allreduce`: RING and BIDIR_RING over cores 0 .. replicas-1 in core
  // order, TORUS_2D and TORUS over every core of the slice (replicas must be all of them).
  uint32_t replicas = 1;
  isa::Collective::Algorithm allreduce = isa::Collective::RING;
  // The all-reduces run while later fragments compute (schedule.h); off, each waits for every
  // earlier fragment and every later one waits for it.
  bool overlap_allreduce = true;
  // XLA's all-reduce combining (allreduce_combiner.h): cross_replica_sums grouped into combined
  // all-reduces of up to combine.threshold_bytes each; 0 bytes: each sum its own all-reduce.
  CombineLimits combine;
  // Convolutions (im2col feeding a matmul, a matmul feeding col2im) run as one fragment with
  // their patches in VMEM only (lowering.h, Fusion); off, each op is a fragment of its own
  // and the patches go through HBM.
  bool fuse_convolutions = true;
  // Max pools whose windows tile the image, and their gradients, run as one vector-unit fragment
  // each (lowering.h, Fusion); off, extract_patches, reduce_max and the gradient's masks go
  // through HBM as fragments of their own.
  bool fuse_pools = true;
  // A reduce_sum or reduce_max over the last axis or over all but the last, whose input is an
  // elementwise group nothing else reads, computes that group tile by tile in its own fragment
  // (lower_fused_reduction); off, the group writes its value to HBM and the reduction reads it.
  bool fuse_reductions = true;
  // An elementwise node whose readers are all elementwise groups of its shape is computed again in
  // each of them instead of written to HBM and read back by each (fusion_plan.h); off, it is a
  // fragment of its own.
  bool recompute_shared_producers = true;
  // Two reductions down the rows that read the same buffer (a batch norm's two sums, its
  // gradient's two) are computed by one fragment reading it once (fusion_plan.h, XLA's
  // multi-output fusion); off, each is a fragment of its own.
  bool fuse_multi_output = true;
  // An elementwise group whose value reductions down the rows read is computed by those
  // reductions' fragment, which writes it too (fusion_plan.h, XLA's producer-consumer
  // multi-output fusion); off, the group is a fragment of its own.
  bool fuse_producers = true;
  // A forward convolution computes the reductions of its output down the rows (a batch norm's
  // sum and sum of squares) from its output tiles in VMEM (lowering.h, Fusion::reductions; XLA's
  // multi-output fusion of a convolution with the reductions of its result); off, they read the
  // output back from HBM.
  bool fuse_conv_reductions = true;
  // A fused 1x1 stride-1 convolution without padding reads its images as its patches
  // (Im2col::identity, conv_fusion.cc); off, it builds them.
  bool fuse_pointwise_convolutions = true;
  // A fused convolution or input gradient whose channels fill the MXU at every kernel offset
  // reads its windows in place (ConvFeed::kWindows, conv_windows.h); off, it builds patches.
  bool fuse_conv_windows = true;
  // An rng_uniform read only by one elementwise group of its shape is a member of that group,
  // drawn in its tiles (fusion_plan.h); off, it is a fragment of its own.
  bool fuse_rng = true;
  // An elementwise group reading one value of its shape is computed again by each fragment that
  // reads it, fused convolutions among them (fusion_plan.h, "groups recomputed by their
  // readers"); off, it writes its value and they read it.
  bool fuse_conv_producers = true;
  // Batched matmuls may be such readers, making the operand in VMEM (fusion_plan.h).
  bool fuse_matmul_producers = true;
  // A batched matmul computes the group that is its product's only reader (fusion_plan.h).
  bool fuse_matmul_consumers = true;
  // A convolution's input gradient computes the group that is its only reader, and the
  // reductions that take it in (fusion_plan.h).
  bool fuse_conv_consumers = true;
};

// The step options a backend's CompileOptions ask for (the ISA's precision stays DEFAULT: the
// MXU's one bf16 pass, whatever CompileOptions::precision says). The all-reduce algorithm must be
// one check_backend_options accepts.
StepOptions step_options_from(const CompileOptions& options);

// `core` is a global core index; its buffers go in its share of the chip's HBM (capacity / cores
// per chip).
absl::StatusOr<CompiledStep> compile_graph(const Graph& graph, const config::SliceSpec& slice,
                                           uint32_t core, const StepOptions& options = {});

}  // namespace tpusim::runtime::tpusim_backend
