#pragma once
// Lowering of graph ops to ISA fragments for the tpusim backend (compiler.h drives it). Each
// function emits one node's fragment(s); shapes are viewed as [rows, cols] with cols the last
// dimension unless stated otherwise. Every op is registered once, in lowering_rules.cc
// (LoweringRule): its lowering, the buffers its fragment reads and writes (buffer_uses.h) and
// whether it rounds a bf16 result. Adding an op is its lowering function and one row there; the
// planning passes and the emission ask the rule, and need no edit.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <absl/status/status.h>

#include "runtime/backend/tpusim/allreduce_combiner.h"
#include "runtime/backend/tpusim/buffer_uses.h"
#include "runtime/backend/tpusim/emitter.h"
#include "runtime/backend/tpusim/hbm_plan.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/schedule.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

// HBM the compiler allocates beyond the plan: constants it makes (iota rows) and per-node
// temporaries, reset for every node.
class CompilerHbm {
 public:
  CompilerHbm(uint64_t constants_base, uint64_t constants_limit);
  // A constant tensor the host writes before the run; identical constants are shared.
  uint64_t constant(const std::vector<float>& values);
  // A temporary of `bytes` for the node being lowered.
  uint64_t temporary(uint64_t bytes);
  void next_node() { temp_top_ = 0; }
  void set_temporaries_base(uint64_t base) { temp_base_ = base; }
  uint64_t constants_end() const { return const_top_; }
  uint64_t temporaries_peak() const { return temp_peak_; }
  const std::vector<std::pair<uint64_t, std::vector<float>>>& constants() const {
    return constants_;
  }
  // The constants made so far, and the temporaries of the node being lowered: HBM its fragment
  // may touch beside its declared buffers (check_fragment_hbm).
  HbmRange constants_range() const { return {const_base_, const_top_}; }
  HbmRange node_temporaries() const { return {temp_base_, temp_base_ + temp_top_}; }

 private:
  uint64_t const_base_;
  uint64_t const_top_;
  uint64_t const_limit_;
  uint64_t temp_base_ = 0, temp_top_ = 0, temp_peak_ = 0;
  std::vector<std::pair<uint64_t, std::vector<float>>> constants_;
};

struct Lowering;

// A fragment the compiler makes of several graph ops, whose intermediate values live only in
// VMEM, as XLA's fusions and its convolution and reduce-window emitters keep them:
//
// Convolutions, in one fragment per tile of images (or of bands of their rows with the rows their
// windows reach, when an image does not fit a tile slot: conv_bands.h), their patches (im2col)
// never in HBM:
//   kConvForward    matmul(extract_patches(x), w), w [patch, filters]: the tile's patches are
//                   built from its images and streamed straight through the MXUs;
//   kConvInputGrad  patches_to_image(matmul(g, w_t)), w_t [filters, patch]: the MXUs write the
//                   tile's patch gradients and the vector unit sums them into its images (col2im);
//   kConvFilterGrad matmul(transpose(reshape(extract_patches(x))), reshape(g)), the kernel's
//                   gradient: the tile's patches are built again from its images and g^T x patches
//                   accumulates over the tiles in VMEM.
// `patches` is the node whose value the fragment keeps in VMEM: the extract_patches (forward,
// kernel gradient) or the matmul (input gradient). A forward convolution whose patches an
// unfused fragment reads too also writes them to their buffer (`patches_kept`, set by the
// compiler), and extract_patches gets no fragment of its own.
//
// Max pools (pool_fusion.cc), on the vector unit, in one fragment per tile of images (or band of
// their rows) that reads the images and writes the pooled values (XLA's reduce-window), or reads
// the images, the pooled values and their gradients and writes the images' gradients
// (select-and-scatter):
//   kMaxPool      reduce_max(reshape(extract_patches(x)), {3}) as layers::max_pooling2d makes it,
//                 with its padding mask added to the view when the window pads;
//   kMaxPoolGrad  its gradient as autodiff makes it: patches_to_image(reshape(hit * broadcast(
//                 g / reduce_sum(hit, {3})))), hit = equal(view, broadcast(reduce_max(view))).
// Where the windows tile the image neither builds them: they are strided views of the images in
// VMEM; otherwise they are built in VMEM as a convolution's patches are.
struct Fusion {
  enum class Kind { kConvForward, kConvInputGrad, kConvFilterGrad, kMaxPool, kMaxPoolGrad };
  Kind kind = Kind::kConvForward;
  std::vector<int> reads;  // the buffers the fragment reads
  int patches = -1;        // convolutions only
  bool patches_kept = false;
  // kConvForward: the reductions over the leading axes of its output, reduce_sum(x) and
  // reduce_sum(square(x)) (a batch norm's moments), that it computes from its output tiles in
  // VMEM, as XLA's multi-output fusion of a convolution with the reductions of its result
  // (attach_output_reductions). They, and the squares, have no fragment of their own.
  std::vector<int> reductions = {};
  // Convolutions: how the MXUs are fed (im2col.h): patches built in VMEM, the images read as
  // they lie (a 1x1 stride-1 kernel), or the windows read in place, a product per kernel offset.
  ConvFeed feed = ConvFeed::kPatches;

  // What the fragment of node `id` uses: it reads `reads` and writes the node's buffer, the
  // patches' when it keeps them, and its reductions'.
  BufferUses uses(int id) const;
};
using Fusions = std::map<int, Fusion>;  // by the node whose fragment computes it

// The square node a convolution output reduction sums (reduce_sum(square(x))); -1 when it sums
// its input as it is.
int summed_square(const Graph& graph, int reduction);

// Per node, the fused fragment that computes it besides that fragment's own node (a forward
// convolution's output reductions and their squares); -1 for every other node.
std::vector<int> computed_inside_fusions(const Graph& graph, const Fusions& fusions);

// The convolutions among the nodes `needed` marks that fit a core's VMEM tiles (an image's
// pixels, patches and result, or a band of its rows', in one tile slot, the weights in the
// once-loaded region).
// With `pointwise`, a 1x1 stride-1 convolution without padding reads its images as its patches
// (ConvFeed::kImages); with `windows`, a forward convolution or input gradient whose channels
// fill the MXUs at every kernel offset reads its windows in place (ConvFeed::kWindows,
// windows_fill_mxus in conv_windows.h), unless a fragment of its own reads its patches.
Fusions find_conv_fusions(const Graph& graph, const std::vector<bool>& needed,
                          const config::CoreSpec& core, bool pointwise = true, bool windows = true);
// The max pools and their gradients among the nodes `needed` marks whose images fit a tile: the
// images' strided views when the windows tile the image (no padding, pool = stride, the image a
// whole number of windows), else bands of rows with their windows.
Fusions find_pool_fusions(const Graph& graph, const std::vector<bool>& needed,
                          const config::CoreSpec& core);
// Gives each fused forward convolution among `fusions` the reductions of its output it can
// compute (Fusion::reductions): over the leading axes, of its output (or that output widened to
// f32, an alias) or of its square, the square read by nothing else, while the kernel and the
// sums fit the once-loaded region and a band's tile still fits its slot with the squares.
void attach_output_reductions(const Graph& graph, const std::vector<bool>& needed,
                              const config::CoreSpec& core, Fusions* fusions);
// Whether fused convolution `id` (a forward convolution or a kernel gradient, reading its images
// as conv.reads[0]) still fits a core's VMEM when it first computes its images' group on each
// band of them (fusion_plan.h, "groups recomputed by their readers"): `blocks` scratch blocks
// of the band's images beside its own scratch, and `rows` values per channel loaded once beside
// the kernel.
bool conv_fits_image_producer(const Graph& graph, int id, const Fusion& conv,
                              const config::CoreSpec& core, uint32_t blocks, size_t rows);
// Whether fused input gradient `id` (a kConvInputGrad) fits its band tiles with a consumer
// taken in (fusion_plan.h) beside it, as `consumer` sizes it.
struct ConvConsumerBlocks;
bool conv_fits_consumer(const Graph& graph, int id, const Fusion& conv,
                        const config::CoreSpec& core, const ConvConsumerBlocks& consumer);
// The group a fused convolution computes on its image bands (fusion_plan.h, "groups recomputed
// by their readers"): none (no members) unless the fusion plan recomputes the images' node.
struct ImageProducer {
  std::vector<int> members;       // the group, its root (the images' node) last
  int image = -1;                 // the value of the images' shape it reads instead
  std::vector<int> row_nodes;     // its values per channel ...
  std::vector<TileOperand> rows;  // ... and how they are loaded once, in that order
  uint32_t blocks = 0;            // its scratch blocks of the band's images
  bool empty() const { return members.empty(); }
};
ImageProducer image_producer(Lowering& l, int images);
// Appends the group's steps to `chain` for `pixels` pixels of a band of images in VMEM at
// `images` ([pixels, channels] f32, the loaded value the group reads), its value written over
// them: `rows` the blocks its rows were loaded into (in ImageProducer::rows' order), `scratch`
// the first of `blocks` scratch blocks of [pixels, channels] f32, one after the other.
void compute_image_producer(Lowering& l, const ImageProducer& p, uint64_t images, uint32_t pixels,
                            const std::vector<isa::Block>& rows, uint64_t scratch,
                            sim::VectorChain& chain);
// The fused fragment (the node is a key of the fusions found).
absl::Status lower_conv(Lowering& l, int id, const Fusion& conv);
// Fused input gradient `id`'s fragment computing `consumer` (the members of an elementwise group
// taken in, its root last) from its image gradients in VMEM, and the `reductions` that take the
// group in (each reduction's members, it last; none: the group alone), the group's value
// written instead of the gradient.
absl::Status lower_conv_into_consumer(Lowering& l, int id, const Fusion& conv,
                                      const std::vector<std::vector<int>>& reductions,
                                      const std::vector<int>& consumer);
absl::Status lower_pool(Lowering& l, int id, const Fusion& pool);
// The TensorFlow name of what a fused fragment computes ("conv2d", "conv2d_backprop_input",
// "conv2d_backprop_filter", "max_pool", "max_pool_grad").
const char* fusion_kind_name(Fusion::Kind kind);
bool is_convolution(Fusion::Kind kind);

struct FusionPlan;

struct Lowering {
  const Graph& graph;
  const HbmPlan& plan;
  Emitter& emit;
  CompilerHbm& hbm;
  isa::Precision precision;
  std::array<uint32_t, 8> gemm_flags;
  uint32_t replicas = 1;  // cores 0 .. replicas-1 run the step
  // cross_replica_sum's: a ring over the replicas in core order, or every core of the slice.
  isa::Collective::Algorithm allreduce = isa::Collective::RING;
  bool overlap_allreduce = true;  // StepOptions::overlap_allreduce
  // The step's fusion plan (null: none), whose folded broadcasts' readers (elementwise fragments
  // all) read the broadcast's input as a row or column operand instead (broadcast_fold): such a
  // broadcast has no buffer and no fragment.
  const FusionPlan* fusion = nullptr;
  // The cross_replica_sums combined into one all-reduce (null: none).
  const CombinedAllReduces* combined = nullptr;

  uint64_t address(int node) const { return plan.address[static_cast<size_t>(node)]; }
  const Node& node(int id) const { return graph.node(id); }
};

// How the compiler lowers one op (lowering_rules.cc, a row per op): the function that emits a
// node's fragment; whether that fragment leaves a bf16 result rounded to bf16 values (a matmul
// rounds its tiles in VMEM; where it does not and the op leaves f32 sums, leaves_f32_sums, the
// compiler adds a rounding pass, round_to_bf16_in_place); and the buffers the fragment reads and
// writes, which the planning passes take their edges from and check_fragment_hbm holds it to.
struct LoweringRule {
  absl::Status (*lower)(Lowering& l, int id) = nullptr;
  bool rounds_bf16_output = false;
  BufferUses (*uses)(const Graph& graph, int id) = reads_inputs_writes_self;
};
// The rule for `op`; null when the tpusim backend has no lowering for it.
const LoweringRule* lowering_rule(Op op);
// The buffers node `id`'s own fragment uses, as its op's rule declares them (an op without a
// rule: its inputs read, itself written; compiling it fails later, with no lowering).
BufferUses lowering_uses(const Graph& graph, int id);
// The buffers the fragment computing node `id` uses: the fusion's when the node is a key of
// `fusions`, else its rule's. A fused elementwise group's fragment uses what its members
// declare, outside the group (step_plan.h).
BufferUses fragment_uses(const Graph& graph, const Fusions& fusions, int id);
// Whether a fused fragment of `kind` leaves its bf16 result rounded (LoweringRule's sense).
bool fusion_rounds_output(Fusion::Kind kind);

// A floating scalar known at compile time: a one-element constant, or a broadcast or reshape of
// one. Elementwise fragments take it as an immediate operand, so it needs no buffer.
bool foldable_scalar(const Graph& graph, int id, float* value);

// The ISA dtype a node's buffer holds (f32 for every floating type, s32 for integers).
isa::DType buffer_dtype(const Node& n);

// A tensor as the [rows, cols] view fragments tile: its last dim the columns (1 for a scalar),
// every leading dim folded into the rows.
inline uint32_t cols_of(const Shape& s) {
  return s.rank() == 0 ? 1 : static_cast<uint32_t>(s.dim(s.rank() - 1));
}
inline uint64_t rows_of(const Shape& s) { return static_cast<uint64_t>(s.elements()) / cols_of(s); }
// The product of dims [from, to) of `s` (1 when empty).
inline int64_t dims_product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int dim = from; dim < to; ++dim) p *= s.dim(dim);
  return p;
}

// Whether a node's fragment leaves f32 sums in its buffer where its type is bf16: a matmul, a
// reduce_sum, patches_to_image or scatter_add of bf16 values (the MXU and the vector unit's
// reductions sum in f32). Elementwise fragments round their bf16 results themselves; the other ops
// only move bf16 values (cross_replica_sum takes f32 only).
bool leaves_f32_sums(const Node& n);
// Rounds a node's buffer to bf16 values in place (nearest even), a row-tiled fragment of one
// vector ROUND_BF16 per tile, for the ops whose lowering does not round on its own (scatter_add,
// unfused patches_to_image): the convert XLA fuses into a bf16 op's output. It costs a read and
// a write of the buffer here, which the fused convert does not.
void round_to_bf16_in_place(Lowering& l, int id);
// Rounds `values` (f32 in the tile's VMEM) to bf16 values in place on the tile's chain, the
// convert XLA fuses into the op that makes a bf16 value; with `after_products`, once every
// instruction the tile fanned out (the MXUs' products into them) is done too (Tile::join).
void round_bf16_in_tile(Tile& t, const isa::Block& values, bool after_products);
// Marks packed_bf16 every DMA among instructions [begin, end) of the core's program (a node's
// fragment) whose HBM block lies inside one of `bf16_buffers` (the bf16 buffers it reads or
// writes): a TPU holds those values in 2 bytes, so that is what their transfers cost, though
// the compiler keeps them as f32 words.
void mark_packed_bf16(sim::CoreBuilder& b, int begin, int end,
                      const std::vector<HbmRange>& bf16_buffers);

absl::Status lower_elementwise(Lowering& l, int id);  // binary, unary, select, cast
// How an elementwise fragment can read a broadcast node's input in place of the broadcast: as a
// row repeated down the output's [rows, cols] view (a per-channel vector stretched over the
// leading dims, as batch norm's mean), a column repeated across it (a per-row value stretched
// over the last dim, as softmax's sum), or one value everywhere (a computed scalar, as an
// optimizer's learning rate or bias correction). kNone: the broadcast must be materialised.
enum class FoldedBroadcast { kNone, kRow, kColumn, kScalar };
FoldedBroadcast broadcast_fold(const Graph& graph, int id);

// A fused group of elementwise nodes of one shape, in graph order; the last is the only one
// read outside the group. One row-tiled fragment computes them all in VMEM.
// A group whose last member is a reduce_sum or reduce_max (reduction_fusion says which) computes
// the other members' values tile by tile in VMEM and reduces them there, as XLA's input fusion
// of elementwise producers into a reduction: the reduced value never reaches HBM.
absl::Status lower_fused(Lowering& l, const std::vector<int>& members);
// Which reductions can take their input's elementwise group into their fragment: over the last
// axis (per row of the input's [rows, cols] view), over every axis but the last (down the rows),
// or over every axis of an input of rank 2 or more (down the rows, then across the sum's row: a
// norm's sum of squares); kNone for other axes, results neither f32 nor bf16, and bf16 results
// of sums down the rows (a bf16 result is rounded where the fragment makes it).
enum class ReductionFusion { kNone, kLastAxis, kLeadingAxes, kAllAxes };
ReductionFusion reduction_fusion(const Graph& graph, int id);
// The vector steps a fused group's chain takes for member `n`, at most: its operands broadcast
// or filled, its op (sigmoid: five steps), its bf16 rounding. A group's chain adds at most
// kFusedGroupFixedSteps (a reduction's or a cast's) and must stay within sim::kMaxChainSteps.
uint64_t fused_member_steps(const Node& n);
inline constexpr uint64_t kFusedGroupFixedSteps = 8;
// Whether one row of a fused group's view fits a VMEM tile slot with every block its fragment
// takes (operands, scratch, output; with a reduction last, its value and partial row too), and
// its chain fits a vector chain (fused_member_steps), so that it can be emitted.
bool fused_group_fits(const Graph& graph, const std::vector<int>& members,
                      const config::CoreSpec& core);
absl::Status lower_fused_reduction(Lowering& l, const std::vector<int>& members);
// One or more reductions down the rows of inputs of one shape (each its fused group's members
// with the reduction last, or the reduction alone: FusionPlan::reduction_members; a fused
// reduction down the rows is the case of one), computed by one fragment that streams their operands
// through VMEM once, every tile's values reduced into each reduction's accumulator in order (XLA's
// multi-output fusion of sibling reductions). Each sum is the one lower_fused_reduction or
// lower_reduce's pipelined pass computes. With `producer` (a group's members, its root last: the
// plan's FusionPlan::node(r).producer), the fragment computes that group too and writes its root's
// value tile by tile beside the sums (XLA's producer-consumer multi-output fusion), unless its
// other readers compute it again (FusionPlan::node(root).recomputed): then it writes nothing.
absl::Status lower_sibling_reductions(Lowering& l, const std::vector<std::vector<int>>& reductions,
                                      const std::vector<int>& producer = {});
absl::Status lower_broadcast(Lowering& l, int id);
absl::Status lower_reduce(Lowering& l, int id);
absl::Status lower_argmax(Lowering& l, int id);
absl::Status lower_one_hot(Lowering& l, int id);
// Row lookups by indexed DMA (lower_gather.cc says how and why): gather tiles its indices and
// gathers each tile's rows in one DMA; scatter_add zeroes its output, then reads, adds and
// writes back one update row at a time, in index order.
absl::Status lower_gather(Lowering& l, int id);
absl::Status lower_scatter_add(Lowering& l, int id);
absl::Status lower_rng(Lowering& l, int id);
absl::Status lower_transpose(Lowering& l, int id);
// Any permutation of a tensor at `src` (shape `in`) into `dst`.
absl::Status emit_transpose(Lowering& l, uint64_t src, const Shape& in,
                            const std::vector<int64_t>& perm, uint64_t dst);
absl::Status lower_concat(Lowering& l, int id);
absl::Status lower_slice(Lowering& l, int id);
absl::Status lower_pad(Lowering& l, int id);
// How a matmul reads its operand `operand` (0: lhs, 1: rhs) where it lies: the node whose buffer
// it reads, and how each entry's matrix lies there. Through a chain of transposes the product
// reads the deepest node whose layout it can take, so that no transpose it reads through is
// computed for it (XLA's TransposeFolding, and its layout assignment, which gives a dot's operand
// the layout that makes a transpose before it a bitcast):
// - entries dense, each matrix as the product reads it or `transposed` (the transposes swap the
//   last two axes and keep the leading ones; the product transposes its slices in VMEM);
// - entries interleaved (`heads` > 0), for a batched product of rank 4 or more: the operand
//   [..., H, S, D], or [..., H, D, S] `transposed`, is a split of heads of the source
//   [..., S, H, D] (attention's transpose_for_scores); entry o x H + h is the source's S rows of
//   D elements from element (o x S x H + h) x D, H x D apart.
// The operand itself when no transpose before it can be read so; always so for the lhs of a
// product with shared 2D weights whose lhs is not 2D (its rows are flattened across the leading
// axes, which a transpose does not keep together).
struct MatmulOperandView {
  int source = -1;
  bool transposed = false;
  uint64_t heads = 0;           // H of interleaved entries; 0: entries dense
  uint64_t rows = 0, cols = 0;  // an interleaved entry's stored rows (S) and their elements (D)
};
MatmulOperandView matmul_operand_view(const Graph& graph, int id, int operand);
// Whether `perm` (a transpose's axes: output axis i is input axis perm[i]) keeps every axis before
// its last tail.size() and takes those as `tail` says (tail[i]: which of them lands at i).
bool permutes_tail(const std::vector<int64_t>& perm, const std::vector<int64_t>& tail);
// A matmul's rule's uses: it reads its operands' views' sources (matmul_operand_view), and writes
// itself. A transpose that only such products read is then
// needed by none and never computed.
BufferUses matmul_uses(const Graph& graph, int id);
// How a batched matmul (no operand shared between its entries: attention's products and their
// gradients) gets operand `operand` in VMEM when an elementwise group recomputed by it makes it
// (fusion_plan.h, "groups recomputed by their readers"): from `images` loaded values of the
// operand's shape, with `blocks` scratch blocks of it. No images: the operand is loaded as it lies.
struct MatmulOperandMaking {
  size_t images = 0;
  uint32_t blocks = 0;
};
// Whether matmul `id` is such a batched product whose tile of one entry, its operands made as
// `making` says, fits a tile slot of `core`'s VMEM; with `consumer` images, also an elementwise
// group consuming its product in the tile (a consumer taken in: fusion_plan.h), from those loaded
// values of the product's shape with that many scratch blocks, the product in a block of its own.
bool batched_matmul_fits(const Graph& graph, int id, const config::CoreSpec& core,
                         const std::array<MatmulOperandMaking, 2>& making,
                         std::optional<MatmulOperandMaking> consumer = std::nullopt);
absl::Status lower_matmul(Lowering& l, int id);
// The batched matmul's fragment computing `consumer` (the members of an elementwise group taken
// in, its root last) from its products in VMEM, the group's value written instead.
absl::Status lower_matmul_into_consumer(Lowering& l, int id, const std::vector<int>& consumer);
// The batched matmul's fragment storing each entry where `merge`, a merge of its heads
// (merged_product in fusion_plan.h), puts it: S rows of D elements, H x D apart in the merge's
// buffer; the product never written as it lies. When the merge reads the product's entries
// transposed, the fragment computes them so: the product of its operands swapped, each read
// transposed. `merge` may instead transpose the product's last two axes (transposed_product):
// the entries are then computed so and stored as they lie.
absl::Status lower_matmul_into_merge(Lowering& l, int id, int merge);
absl::Status lower_extract_patches(Lowering& l, int id);
absl::Status lower_patches_to_image(Lowering& l, int id);
// An all-reduce of the input over the replicas (Lowering::allreduce); on one replica the node
// shares its input's buffer and emits nothing. Overlapped, it signals the emitter's
// collectives-done flag instead of `written`, and the compiler tracks it (schedule.h).
absl::Status lower_cross_replica_sum(Lowering& l, int id);

// Materialises `from` (shape `in`, buffer at `src`) broadcast to `out` with input dim i at
// output dim map[i], into `dst`.
void emit_broadcast(Lowering& l, uint64_t src, const Shape& in, const std::vector<int64_t>& map,
                    const Shape& out, uint64_t dst);
// The fallback for any broadcast: one [P, Q] block of the output's last two dims per index of the
// leading dims.
void emit_broadcast_general(Lowering& l, uint64_t src, const Shape& in,
                            const std::vector<int64_t>& map, const Shape& out, uint64_t dst);

}  // namespace tpusim::runtime::tpusim_backend
