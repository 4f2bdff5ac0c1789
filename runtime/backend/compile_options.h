#pragma once
// The options a graph is compiled with (Backend::compile). Which backend honours which is
// declared by each backend (declaration.h) and checked in one place, check_backend_options.

#include <cstdint>

#include "common/named_values.h"

namespace tpusim::runtime {

// What matmuls and convolutions compute. kFp32 ("fp32"): in f32. kMxu ("mxu"): their inputs
// rounded to bf16 and products accumulated in f32, as the TPU's MXU does at DEFAULT precision.
enum class Precision { kFp32, kMxu };
inline constexpr NamedValues<Precision, 2> kPrecisions{
    {{{Precision::kFp32, "fp32"}, {Precision::kMxu, "mxu"}}}};

// How the tpusim backend's cross_replica_sum moves the data over the interconnect (the ISA's
// Collective algorithms): kRing ("ring": cores 0 .. replicas-1 in core order, the order the cpu
// and gpu backends add in), kBidirRing ("bidir_ring": half each way round that ring), kTorus2d
// ("torus2d") or kTorus ("torus"): over every core of the slice, so replicas must be all of them.
// The others add in other orders, so their sums differ from the cpu backend's by rounding.
enum class AllReduceAlgorithm { kRing, kBidirRing, kTorus2d, kTorus };
inline constexpr NamedValues<AllReduceAlgorithm, 4> kAllReduceAlgorithms{
    {{{AllReduceAlgorithm::kRing, "ring"},
      {AllReduceAlgorithm::kBidirRing, "bidir_ring"},
      {AllReduceAlgorithm::kTorus2d, "torus2d"},
      {AllReduceAlgorithm::kTorus, "torus"}}}};

struct CompileOptions {
  Precision precision = Precision::kFp32;
  // Copies of the step run side by side, one per core, each on its own batch.
  uint32_t replicas = 1;
  // How the gradients' all-reduces run on the tpusim backend (AllReduceAlgorithm).
  AllReduceAlgorithm allreduce = AllReduceAlgorithm::kRing;
  // Whether the tpusim backend's all-reduces run while the rest of the step computes, as XLA's
  // asynchronous all-reduce does (each starts once the gradient it sums is written, and only what
  // reads its result waits for it); off, each waits for all the step's earlier work and all later
  // work waits for it. The values are the same either way.
  bool overlap_allreduce = true;
  // XLA's all-reduce combining on the tpusim backend: the step's cross_replica_sums grouped, in
  // the order they run, into combined all-reduces of up to this many f32 bytes each, every group
  // one collective that pays one latency (tpusim_backend/allreduce_combiner.h). A group runs where
  // its last member would have, so a big threshold saves latencies and loses overlap. 0: every
  // sum its own all-reduce. A combined buffer's ring segments differ from its tensors' own, so
  // its sums add in another order than the cpu backend's and differ from them by rounding.
  uint64_t allreduce_combine_bytes = 0;
  // Whether the tpusim backend computes a convolution in one fragment with its patches (im2col)
  // in VMEM only, as XLA's convolution emitter does; off, extract_patches, the matmul and
  // patches_to_image are fragments of their own and the patches go through HBM. The values are
  // the same either way.
  bool fuse_convolutions = true;
  // Whether the tpusim backend computes a max pool whose windows tile the image, and its
  // gradient, in one vector-unit fragment each, as XLA's reduce-window and select-and-scatter;
  // off, extract_patches, reduce_max and the gradient's masks go through HBM as fragments of
  // their own. The values are the same either way.
  bool fuse_pools = true;
  // Whether the tpusim backend computes a reduce_sum or reduce_max over the last axis (or over all
  // but the last) together with the elementwise ops that produce its input, tile by tile in VMEM,
  // as XLA's input fusion; off, those ops write their value to HBM for the reduction to read.
  // Over the last axis the values are the same either way; down the rows the partial sums of
  // VMEM tiles are added in order, so f32 sums can round differently.
  bool fuse_reductions = true;
  // Whether the tpusim backend computes an elementwise value that several elementwise fragments
  // of its shape read again inside each of them, as XLA duplicates cheap producers into their
  // consumers' fusions; off, it is written to HBM and each reads it. The values are the same
  // either way.
  bool recompute_shared_producers = true;
  // Whether the tpusim backend computes two reductions down the rows that read the same value (a
  // batch norm's sum and sum of squares, its gradient's two sums) in one fragment that reads it
  // once, as XLA's multi-output fusion of sibling reductions; off, each reads it. Each sum adds
  // VMEM tiles' partial sums in order, and the tiles' rows depend on the fragment, so f32 sums can
  // round differently.
  bool fuse_multi_output = true;
  // Whether the tpusim backend computes an elementwise group whose value reductions down the
  // rows read (a ReLU's gradient, which a batch norm's gradient sums) in those reductions'
  // fragment, which writes the value beside the sums, as XLA's producer-consumer multi-output
  // fusion; off, the group writes it and the reductions read it back. The values are the same;
  // the sums' partial rows follow the fragment's tiles, so f32 sums can round differently.
  bool fuse_producers = true;
  // Whether the tpusim backend computes the reductions of a convolution's output down the rows (a
  // batch norm's sum and sum of squares) inside the convolution's fragment, from its output tiles
  // in VMEM, as XLA's multi-output fusion of a convolution with the reductions of its result;
  // off, they read the output back from HBM. The convolution's tiles set the order its partial
  // sums are added in, so f32 sums can round differently.
  bool fuse_conv_reductions = true;
  // Whether the tpusim backend's fused 1x1 stride-1 convolutions without padding, whose patches
  // are their images, feed the MXUs from the images as they lie (and write an input gradient's
  // products straight into the image rows), as XLA lowers such a convolution to a dot over the
  // channels; off, they build the patches in VMEM as any other kernel's. The values are the same.
  bool fuse_pointwise_convolutions = true;
  // Whether the tpusim backend's fused forward convolutions and input gradients whose channels
  // fill the MXU's depth (or columns) at every kernel offset read their windows in place, one
  // product per kernel offset over strided views of the images, as XLA's TPU convolution emitter
  // walks a window over the activations; off, they build the patches in VMEM (im2col) and sum
  // the patch gradients back (col2im) on the vector unit. The values are the same.
  bool fuse_conv_windows = true;
  // Whether the tpusim backend draws an rng_uniform whose readers are all in one elementwise
  // group of its shape (a dropout's uniforms, compared with the rate) inside that group's tiles,
  // as XLA's fused loop generates an rng's elements where it reads them; off, the draws are
  // written to HBM in f32 and read back. The values are the same (counter-based draws).
  bool fuse_rng = true;
  // Whether the tpusim backend computes an elementwise group that reads one value of its own
  // shape (with per-channel rows and scalars: a batch norm applied and its ReLU) again inside
  // every fragment that reads it, fused convolutions among them (on their image bands in VMEM,
  // on the way to the MXUs), as XLA fuses such a producer into each consumer's fusion; off, the
  // group writes its value to HBM and each reader reads it back. The values are the same; the
  // fragments' tiles can change, so f32 sums can round differently.
  bool fuse_conv_producers = true;
  // Whether a batched matmul (attention's products and their gradients) may be such a reader: it
  // makes its operand from the group's operands in VMEM before its MXUs read it, as XLA fuses an
  // elementwise producer into the dot that reads it (a dropout's multiply into the product of
  // the dropped probabilities). The values are the same.
  bool fuse_matmul_producers = true;
  // Whether a batched matmul computes the elementwise group that is its product's only reader
  // (reading besides it values of its shape and immediates) from its products in VMEM, never
  // writing the product, as XLA's output fusion of a dot with its consumers (a dropout's
  // gradient into the product that makes the incoming gradient). The values are the same.
  bool fuse_matmul_consumers = true;
  // Whether a convolution's input gradient computes the elementwise group that is its only
  // reader (reading besides it values of its shape, values per channel and immediates), and the
  // sibling reductions that take the group in, from its image gradients in VMEM, never writing
  // the gradient, as XLA's output fusion of a convolution with its consumers and multi-output
  // fusion of reductions with the convolution that produces their operand (a batch norm's
  // gradient sums at a residual block's output). The values are the same but for the sums' f32
  // rounding, which follows the gradient's tiles.
  bool fuse_conv_consumers = true;
  // The cpu backend's reduce_sum accumulates in double unless this is set; set, in f32 in the
  // same order, as the TPU's vector unit (and tpusim) sums. tpusim compare's rounding baseline
  // sets it on its nudged run, so that the baseline's drift includes what f32 sums add. The
  // other backends ignore it (tpusim always sums in f32; gpu sums as the cpu does by default).
  bool f32_reductions = false;
  // Replica folding (docs/architecture.md, "Scale"; the tpusim backend, timing-only runs): only
  // replicas 0 .. simulated_replicas-1 run the step cycle-level, take batches and give outputs;
  // every other replica's core is a shadow that runs only the step's collectives, joining each
  // when the simulated replicas do (they are symmetric), so the interconnect and every chip's
  // share of the collectives' HBM traffic are simulated in full while the slice's other cores
  // cost no compute. 0 (or `replicas`): every replica simulated.
  uint32_t simulated_replicas = 0;
};

}  // namespace tpusim::runtime
