#pragma once
// Which graph nodes the tpusim compiler computes together, in VMEM, instead of each in a fragment
// of its own through HBM, as XLA's fusion passes decide it for a TPU:
//
// - groups: elementwise nodes of one shape whose intermediates nothing else reads, computed by one
//   row-tiled fragment (loop fusion), an rng_uniform among them drawn in the group's tiles (XLA
//   generates an rng's elements in the fused loop that reads them); a reduction over the last
//   axis, over all but the last or over all of them takes in the group that computes its input
//   (input fusion);
// - folded broadcasts: a row or column broadcast read only by elementwise fragments of its own
//   shape is read in place by them, never written;
// - recomputed producers: an elementwise node whose readers are all in other groups of its shape
//   is computed again inside each of them (XLA duplicates cheap producers into their consumers'
//   fusions) rather than written to HBM and read back by each;
// - sibling reductions: two reductions down the rows of values of one shape that read the same
//   buffer (a batch norm's sum and sum of squares of x, its gradient's sum(g) and
//   sum(g (x - mean))) computed by one fragment that reads the buffer once (XLA's multi-output
//   fusion of sibling reduce fusions). The later one's fragment computes both; the earlier one,
//   and what reads it before the later one's place, are emitted there (schedule.h);
// - producers written by their reductions: an elementwise group whose value a reduction down the
//   rows (or a sibling pair) streams, and which other fragments read too, is computed by the
//   reductions' fragment, which writes the value as well as the sums (XLA's producer-consumer
//   multi-output fusion: the reduction's fusion takes in its producer and keeps the producer's
//   value as an extra output), so the value is not written by one fragment and read back by the
//   next. The group is emitted at the reductions' place. A plain reduction over the last axis
//   (softmax's sum and maximum) takes in its input's group likewise, writing it only when a
//   reader does not compute it again.
// - groups recomputed by their readers: an elementwise group that reads values of its own shape,
//   rows (a value per channel) and scalars, whose every reader is a fused convolution taking it
//   as its images (forward or kernel gradient; the group then reading one value of its shape),
//   a batched matmul taking it as one operand (the group reading values of its shape only), an
//   elementwise member of another group of its shape, or part of the reduction fragment that
//   computes it (a producer taken in), is computed again by each of them and never written, when
//   its readers loading its operands move no more bytes than the group's own transfers (its
//   operands read, its value written and read back; where a reader is an elementwise group,
//   which tpusim could not recompute in turn, fewer than its value's alone), and a group holding
//   an expensive op (a divide, a transcendental) is not duplicated into several readers unless
//   that cuts the bytes below 0.3 of its transfers; elementwise readers also take a group that
//   reads a value per row of its shape (softmax's maximum): a convolution
//   computes it on each band of its images in VMEM before using them, a matmul on the entries
//   of its tile, a group as members of its own. This is XLA's FusionMerger, which merges a
//   producer fusion into all its consumers, convolution and dot fusions among them, when that
//   moves no more bytes: attention's dropped probabilities (read by the product with the values
//   and, transposed, by the values' gradient), a batch norm
//   applied with its ReLU (read by the next convolution, its kernel gradient and the ReLU's
//   gradient, each then reading the convolution output instead), the ReLU's gradient a batch
//   norm's gradient sums (read again by the input gradient, which reads the batch norm's input
//   already).
// - consumers taken in by matmuls: an elementwise group of a batched matmul's shape that is the
//   product's only reader, and reads besides it only values of its shape, immediates, and
//   values loaded once that its tile reads a row of (scalars, rows of the last axis, rows that
//   change every whole number of entries: row_period), is computed by the matmul's fragment from
//   the products in VMEM, and the product is never written: XLA's output fusion of a dot with
//   its elementwise consumers (a dropout's gradient, the incoming gradient times the keep mask,
//   into the product that makes the incoming gradient; attention's scores scaled and added the
//   mask's adder into the product that makes them). The fragment is emitted at the group's
//   place.
// - consumers taken in by convolution input gradients: likewise an elementwise group (with a
//   buffer of its own) that is a fused input gradient's only reader, and reads besides it only
//   values of its shape, values per channel and immediates, is computed by the gradient's
//   fragment from the image gradients in VMEM, band by band, and so are the sibling reductions
//   that take the group in (a batch norm's gradient sums of the ReLU's gradient at a residual
//   block's output): XLA's output fusion of a convolution with its elementwise consumers and
//   the multi-output fusion of reductions with the convolution that produces their operand. The
//   fragment is emitted at the group's place, or its reductions'.
//
// The convolutions and max pools a node fuses (lowering.h, Fusion) are decided before and are
// given here.

#include <cstdint>
#include <vector>

#include "configs/slice_spec.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

struct FusionOptions {
  bool fuse_reductions = true;   // StepOptions::fuse_reductions
  bool recompute = true;         // StepOptions::recompute_shared_producers
  bool multi_output = true;      // StepOptions::fuse_multi_output
  bool producers = true;         // StepOptions::fuse_producers
  bool conv_producers = true;    // StepOptions::fuse_conv_producers
  bool matmul_producers = true;  // StepOptions::fuse_matmul_producers
  bool matmul_consumers = true;  // StepOptions::fuse_matmul_consumers
  bool conv_consumers = true;    // StepOptions::fuse_conv_consumers
  bool rng = true;               // StepOptions::fuse_rng
};

// What the plan decides for one node.
struct NodeFusion {
  bool needed = false;          // some lowered fragment, output or update reads the node
  int group = -1;               // the root of the group computing it; -1: none
  bool folded = false;          // a broadcast read in place
  bool recomputed = false;      // computed again in each reader's group: no buffer of its own
  std::vector<int> recomputes;  // as a group's root: the recomputed nodes its group computes
  // Sibling reductions: as a reduction whose fragment computes an earlier sibling too, that
  // sibling; as such a sibling, the reduction computing it (-1: none).
  int sibling = -1;
  int computed_with = -1;
  // As a reduction (the later of a sibling pair, or one alone), the group root whose group its
  // fragment computes and writes; that root's computed_with is the reduction (-1: none).
  int producer = -1;
  // A batched matmul's or a convolution input gradient's consumer taken in: as the product, the
  // root of the group whose fragment computes it first, its value never written; as that root,
  // the product (-1: none). The product's fragment's reads are then that fragment's. A merge of a
  // batched product's heads, or a transpose of a product, is such a consumer too
  // (store_matmuls_through_merges).
  int consumer = -1;
  int consumes = -1;
  std::vector<int> taken_reads;
};

struct FusionPlan {
  std::vector<NodeFusion> nodes;  // one per graph node
  uint64_t fused_reductions = 0;
  uint64_t recomputed_nodes = 0;
  uint64_t multi_output_fusions = 0;
  uint64_t producer_fusions = 0;          // groups written by the reductions of their value
  uint64_t reader_recomputed_groups = 0;  // groups recomputed by their readers
  uint64_t conv_producers = 0;            // fused convolutions computing their images' group
  uint64_t matmul_producers = 0;          // batched matmuls making an operand from its group
  uint64_t matmul_consumers = 0;          // groups computing the batched matmul they consume
  uint64_t merged_products = 0;           // matmuls stored through a merge of heads or transpose
  uint64_t conv_consumers = 0;            // groups computing the input gradient they consume

  const NodeFusion& node(int id) const { return nodes[static_cast<size_t>(id)]; }
  NodeFusion& node(int id) { return nodes[static_cast<size_t>(id)]; }
  // Per node, whether it is needed, and the reduction computing it with its sibling (-1: none):
  // NodeFusion::needed and computed_with, for passes that take them as vectors.
  std::vector<bool> needed() const;
  std::vector<int> computed_with() const;
  // The nodes the group of `root` computes, in graph order (its root last).
  std::vector<int> members(int root) const;
  // The nodes a reduction's fragment computes: its group's members (a fused reduction), or the
  // reduction alone.
  std::vector<int> reduction_members(int reduction) const;
  // Whether the node gets no fragment: folded or recomputed (fused members are skipped by root).
  bool absorbed(int id) const {
    return node(id).folded || node(id).recomputed || node(id).consumer >= 0;
  }
  // The buffers a read of `id` really reads: a folded broadcast's input, a recomputed node's
  // inputs, a product computed by its consumer's fragment's operands (seen through the same
  // way), else `id` itself.
  std::vector<int> sources(const Graph& graph, int id) const;
};

// The node whose buffer `id` is, through reshapes to its own shape (a widening cast of a bf16
// value is compiled as one: compiler.cc); `id` itself when it is no such alias.
int same_shape_owner(const Graph& g, int id);
// Per node, whether an output or an update reads it (its value must be written).
std::vector<bool> exported_nodes(const Graph& g);

// Nodes whose values some lowered fragment (as its rule or fusion declares: fragment_uses),
// output or update reads, or an alias of such a node shares. Scalars that fold into elementwise
// fragments as immediates are not read, so their producers need no code.
std::vector<bool> needed_nodes(const Graph& g, const Fusions& fusions);

// The values of its own shape a group recomputed by its readers reads, its rows (nodes of a
// value per channel: folded row broadcasts, or vectors of the group's last dimension) and its
// columns (a value per row of its [rows, cols] view: folded column broadcasts, or its shape with
// the last dimension 1: softmax's maximum), as the readers load them; not `ok` when the group
// reads anything else, or no value of its shape. Only elementwise groups take columns.
struct ProducerOperands {
  bool ok = false;
  std::vector<int> images;
  std::vector<int> rows;
  std::vector<int> columns;
};
ProducerOperands producer_operands(const Graph& graph, const FusionPlan& plan,
                                   const std::vector<int>& members);
// The scratch blocks of its value's shape that such a group takes when a convolution computes
// it on a band of images (its values as group_scratch.h places them, the last into the images'
// own block).
// `kept`: members whose values stay in their blocks to the end of the group (plan_scratch).
uint32_t producer_scratch_blocks(const Graph& graph, const FusionPlan& plan,
                                 const std::vector<int>& members,
                                 const std::vector<int>& kept = {});

// Whether `shape` is a value per channel of `of`: its last dimension, every other 1 (a row of
// `of`'s [rows, cols] view, as classify_operand reads one).
bool per_channel(const Shape& shape, const Shape& of);
// Whether `shape` is a value per row of `of`'s [rows, cols] view: `of`'s dims with the last 1 (a
// column, as classify_operand reads one).
bool per_row(const Shape& shape, const Shape& of);
// The rows of `of`'s [rows, cols] view that one row of `shape` covers when it is
// [outer..., 1, ..., 1, cols] lined up with `of` (leading 1s added): `of`'s leading dims, then
// dims it broadcasts over, then `of`'s last (BERT's attention mask, [batch, 1, 1, keys], over
// heads and queries); 0 when it is not so, or is a plain row (per_channel).
uint64_t row_period(const Shape& shape, const Shape& of);

// Per node, the needed nodes whose rules or fusions read it (fragment_uses), in graph order.
std::vector<std::vector<int>> fragment_readers(const Graph& g, const Fusions& fusions,
                                               const FusionPlan& plan);

// The group that could take in `product`, whose fragments' readers are `read_by` (as
// fragment_readers gives them): the one group every reader is a member of, of the product's shape,
// its members elementwise and none an rng draw, computed by its own fragment (not recomputed or
// folded, no reduction of its own, consuming nothing else), and not taken in by reductions unless
// `taken_by_reductions` (a convolution computes those too); -1 when there is none.
int consuming_group(const Graph& graph, const FusionPlan& plan, const std::vector<int>& read_by,
                    int product, bool taken_by_reductions);

// Takes in each batched matmul's consumer (fusion_plan.h, above) in `plan`, whose groups
// recomputed by their readers are decided.
void take_in_matmul_consumers(const Graph& graph, const Fusions& fusions,
                              const config::CoreSpec& core, FusionPlan* plan);

// When node `id` merges a batched product's heads, that product: `id` is a transpose [..., H, S,
// D] -> [..., S, H, D] of a matmul with no operand shared between its entries (attention's context
// and the gradients of its queries and values), or of a transpose of such a product's last two
// axes (the gradient of its keys, [..., H, D, S] first); -1 otherwise.
int merged_product(const Graph& graph, int id);
// When node `id` transposes a matmul's last two axes, that matmul, if its rows are its own (two
// 2D operands, or no operand shared between its entries); -1 otherwise.
int transposed_product(const Graph& graph, int id);

// A batched matmul whose only reader is a merge of its heads (merged_product), directly or through
// the transpose of its entries, and which is not an output, stores each entry where the merge puts
// it, S rows of D elements H x D apart (XLA's layout assignment gives the dot's output the layout
// that makes the transposes bitcasts, a dot's output transposed being the product of its operands
// swapped and transposed): in `plan`, the product's (and that transpose's) consumer is the merge,
// whose fragment is the product's (NodeFusion::consumer); neither is written. Then, likewise, a
// matmul whose only reader transposes its last two axes (transposed_product: a weight gradient
// x^T g transposed back, BERT's word embeddings') computes its product transposed, its operands
// swapped, into the transpose's buffer.
void store_matmuls_through_merges(const Graph& graph, const Fusions& fusions, FusionPlan* plan);

// Takes in each fused convolution input gradient's consumer, and the reductions that take the
// consumer in (fusion_plan.h, above), in `plan`, whose other decisions are made.
void take_in_conv_consumers(const Graph& graph, const Fusions& fusions,
                            const config::CoreSpec& core, FusionPlan* plan);

// Marks the groups recomputed by their readers (fusion_plan.h, above) in `plan`, whose groups,
// folded broadcasts, recomputed producers, sibling reductions and producers taken in are
// decided: the groups' members recomputed, their reader groups' `recomputes` given them.
// `matmuls`: batched matmuls may be such readers too.
void recompute_into_readers(const Graph& graph, const Fusions& fusions,
                            const config::CoreSpec& core, bool matmuls, FusionPlan* plan);

FusionPlan plan_fusions(const Graph& graph, const Fusions& fusions, const config::CoreSpec& core,
                        const FusionOptions& options);

}  // namespace tpusim::runtime::tpusim_backend
