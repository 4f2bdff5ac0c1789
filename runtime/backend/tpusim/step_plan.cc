#include "runtime/backend/tpusim/step_plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/align.h"
#include "common/strings.h"
#include "runtime/backend/tpusim/schedule.h"
#include "sim/core_map.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

// Pass 1: the convolutions and max pools that fuse, then the elementwise groups, folded
// broadcasts and recomputed producers around them. The fused convolutions read images,
// gradients and kernels, not patches, and the fused pools images, pooled values and gradients:
// patches (and the pools' masks) that no other fragment reads are needed no more and live in
// VMEM alone, or nowhere.
void plan_fusion(const Graph& graph, const config::CoreSpec& core, const StepOptions& options,
                 StepPlan& plan) {
  const std::vector<bool> unfused = needed_nodes(graph, {});
  if (options.fuse_convolutions)
    plan.fusions = find_conv_fusions(graph, unfused, core, options.fuse_pointwise_convolutions,
                                     options.fuse_conv_windows);
  if (options.fuse_pools) plan.fusions.merge(find_pool_fusions(graph, unfused, core));
  if (options.fuse_conv_reductions) attach_output_reductions(graph, unfused, core, &plan.fusions);
  FusionOptions fusion_options;
  fusion_options.fuse_reductions = options.fuse_reductions;
  fusion_options.recompute = options.recompute_shared_producers;
  fusion_options.multi_output = options.fuse_multi_output;
  fusion_options.producers = options.fuse_producers;
  fusion_options.conv_producers = options.fuse_conv_producers;
  fusion_options.matmul_producers = options.fuse_matmul_producers;
  fusion_options.matmul_consumers = options.fuse_matmul_consumers;
  fusion_options.conv_consumers = options.fuse_conv_consumers;
  fusion_options.rng = options.fuse_rng;
  plan.fusion = plan_fusions(graph, plan.fusions, core, fusion_options);
  plan.nodes.resize(static_cast<size_t>(graph.size()));
  for (int id = 0; id < graph.size(); ++id) {
    NodePlan& n = plan.nodes[static_cast<size_t>(id)];
    n.needed = plan.fusion.node(id).needed;
    n.group = plan.fusion.node(id).group;
  }
}

// Pass 2: a fused convolution's patches are computed in its fragment (and still written by its
// forward convolution when an unfused fragment reads them: patches_kept); folded broadcasts and
// recomputed producers are computed by their readers.
void mark_absorbed(StepPlan& plan) {
  for (auto& [id, fused] : plan.fusions) {
    if (fused.kind != Fusion::Kind::kConvForward && fused.kind != Fusion::Kind::kConvInputGrad)
      continue;
    NodePlan& patches = plan.nodes[static_cast<size_t>(fused.patches)];
    patches.absorbed = true;
    fused.patches_kept = patches.needed;
  }
  for (size_t id = 0; id < plan.nodes.size(); ++id) {
    if (plan.fusion.absorbed(static_cast<int>(id))) plan.nodes[id].absorbed = true;
  }
  // A forward convolution's output reductions are computed in its fragment (their squares are
  // needed by nothing).
  for (const auto& [id, fused] : plan.fusions) {
    for (int r : fused.reductions) plan.nodes[static_cast<size_t>(r)].absorbed = true;
  }
}

// Pass 4's last step: a forward convolution's output reductions, which its fragment writes, take
// their place just before it in the order, so that their buffers are allocated before it runs
// (the HBM plan allocates a buffer at its node's place).
void place_conv_reductions(const Fusions& fusions, std::vector<int>& order) {
  for (const auto& [id, fused] : fusions) {
    for (int r : fused.reductions) {
      order.erase(std::find(order.begin(), order.end(), r));
      order.insert(std::find(order.begin(), order.end(), id), r);
    }
  }
}

// Pass 5, for one node: whether its value has a buffer. Variables, constants and infeeds always
// do; a dead node, a group member other than its root and a node computed by its readers do not.
bool materialized(const Graph& graph, const StepPlan& plan, int id) {
  const Op op = graph.node(id).op;
  const NodePlan& n = plan.node(id);
  const bool source = op == Op::kVariable || op == Op::kConstant || op == Op::kInfeed;
  if (!n.needed && !source) return false;
  if (n.group >= 0 && n.group != id) return false;
  return !plan.fusion.absorbed(id);
}

// Pass 5, for one needed node: the buffers its fragment declares it uses (fragment_uses), added
// to those of the node that emits its fragment (its group's root, or its combined all-reduce's
// root). Reads of folded broadcasts and recomputed nodes are seen through to the buffers they
// are computed from, and reads inside the group dropped; so are writes of nodes without a
// buffer (a group's members other than its root), whose values stay in the fragment's VMEM.
void add_uses(const Graph& graph, StepPlan& plan, int id) {
  const int root = plan.node(id).group;
  const BufferUses uses = fragment_uses(graph, plan.fusions, id);
  const int combined_root = plan.combined.root(id);
  int emitter = combined_root >= 0 ? combined_root : root >= 0 ? root : id;
  // A reduction its sibling's fragment computes (fusion_plan.h): that fragment reads and writes
  // for it.
  if (const int with = plan.fusion.node(emitter).computed_with; with >= 0) emitter = with;
  NodePlan& e = plan.nodes[static_cast<size_t>(emitter)];
  for (int in : uses.reads) {
    for (int s : plan.fusion.sources(graph, in)) {
      if (root >= 0 && plan.node(s).group == root) continue;  // inside the group
      e.reads.push_back(s);
    }
  }
  for (int w : uses.writes) {
    if (plan.node(w).materialized) e.writes.push_back(w);
  }
}

// Pass 5: buffers, then the uses of every fragment.
void plan_buffers(const Graph& graph, StepPlan& plan) {
  for (int id = 0; id < graph.size(); ++id)
    plan.nodes[static_cast<size_t>(id)].materialized = materialized(graph, plan, id);
  const std::vector<int> inside = computed_inside_fusions(graph, plan.fusions);
  for (int id = 0; id < graph.size(); ++id) {
    if (plan.node(id).needed && !plan.fusion.absorbed(id) && inside[static_cast<size_t>(id)] < 0)
      add_uses(graph, plan, id);
  }
}

// What holds the peak: the variables and constants, then the live buffers grouped by op, dtype
// and shape, the five largest groups ("24 x matmul bf16[14, 16, 512, 512] (2818572288 bytes)").
std::string what_holds_the_peak(const Graph& graph, const HbmPlan& hbm) {
  std::map<std::string, std::pair<int, uint64_t>> groups;  // key -> (count, bytes)
  for (int id : hbm.live_at_device_peak) {
    const Node& n = graph.node(id);
    auto& g = groups[str_cat(op_name(n.op), " ", dtype_name(n.dtype), n.shape.str())];
    g.first += 1;
    g.second += device_bytes(n);
  }
  std::vector<std::pair<uint64_t, std::string>> by_bytes;
  for (const auto& [key, g] : groups)
    by_bytes.emplace_back(g.second, str_cat(g.first, " x ", key, " (", g.second, " bytes)"));
  std::sort(by_bytes.rbegin(), by_bytes.rend());
  std::vector<std::string> parts;
  for (size_t i = 0; i < std::min<size_t>(5, by_bytes.size()); ++i)
    parts.push_back(by_bytes[i].second);
  return str_cat("At the peak: variables and constants ", hbm.device_persistent_bytes,
                 " bytes; the largest live groups ", str_join(parts, ", "));
}

// Pass 6: each core of a chip owns an equal share of the chip's HBM, as a v3 core owns 16 of its
// chip's 32 GiB; the core's buffers live in its share, below the compiler's constants.
absl::Status plan_memory(const Graph& graph, const config::SliceSpec& slice, uint32_t core,
                         uint32_t replicas, const std::vector<uint64_t>& temporaries,
                         StepPlan& plan) {
  const sim::HbmShare share = sim::hbm_share(slice, sim::CoreId{core});
  plan.hbm_share = share.bytes;
  plan.hbm_base = share.base;
  PlanRequest& request = plan.request;
  request.temporaries = temporaries;
  request.replicas = replicas;
  request.order = plan.order;
  request.overlapped_collectives = plan.overlapped;
  for (int id = 0; id < graph.size(); ++id) {
    const NodePlan& n = plan.node(id);
    request.elementwise_fragment.push_back(plan.emits(id) && is_elementwise(graph.node(id).op) &&
                                           plan.fusions.count(id) == 0);
    request.materialized.push_back(n.materialized);
    // What a fragment writes is live when it runs, as what it reads is.
    std::vector<int>& uses = request.reads.emplace_back(n.reads);
    uses.insert(uses.end(), n.writes.begin(), n.writes.end());
  }
  plan.hbm = plan_hbm(graph, plan.hbm_base, &request);
  plan.hbm_span = share.span;
  if (plan.hbm.device_peak_bytes + kConstantsRegion <= plan.hbm_share) {
    // The simulator's 4-byte values fit its span whenever the device's fit the share.
    if (plan.hbm.peak_bytes + kConstantsRegion <= plan.hbm_span) return absl::OkStatus();
    return absl::InternalError(str_cat(
        "tpusim backend: the step's tensors as the simulator holds "
        "them (",
        plan.hbm.peak_bytes, " bytes) outgrow its ", plan.hbm_span, "-byte span of a core's HBM"));
  }
  int largest = 0;
  for (int id = 0; id < graph.size(); ++id) {
    if (graph.node(id).shape.elements() > graph.node(largest).shape.elements()) largest = id;
  }
  const Node& big = graph.node(largest);
  return absl::ResourceExhaustedError(
      str_cat("tpusim backend: the step's tensors need ", plan.hbm.device_peak_bytes,
              " bytes of HBM at their peak (the largest: ", op_name(big.op), " '", big.label, "' ",
              dtype_name(big.dtype), big.shape.str(), ", ", device_bytes(big),
              " bytes); a core has ", plan.hbm_share, " (its share of the chip's ",
              slice.chip.hbm.capacity_bytes, "). ", what_holds_the_peak(graph, plan.hbm)));
}

}  // namespace

bool StepPlan::emits(int id) const {
  const NodePlan& n = node(id);
  if (!n.needed || n.absorbed) return false;
  if (n.group >= 0 && n.group != id) return false;          // computed with its group's root
  if (fusion.node(id).computed_with >= 0) return false;     // with its sibling
  return combined.root(id) < 0 || combined.root(id) == id;  // else summed with its root's
}

absl::StatusOr<StepPlan> plan_step(const Graph& graph, const config::SliceSpec& slice,
                                   uint32_t core, const StepOptions& options, StepPlan* refused,
                                   const std::vector<uint64_t>& temporaries) {
  StepPlan plan;
  plan.overlapped = options.overlap_allreduce && options.replicas > 1;
  plan_fusion(graph, slice.chip.core, options, plan);
  mark_absorbed(plan);
  // The cross_replica_sums XLA would combine, each group one all-reduce where its last member
  // runs.
  if (options.replicas > 1)
    plan.combined = CombinedAllReduces(graph, plan.fusion.needed(), plan.overlapped,
                                       options.combine, plan.fusion.computed_with());
  plan.order = emission_order(graph, plan.overlapped, &plan.combined, plan.fusion.computed_with());
  place_conv_reductions(plan.fusions, plan.order);
  plan_buffers(graph, plan);
  if (absl::Status s = plan_memory(graph, slice, core, options.replicas, temporaries, plan);
      !s.ok()) {
    if (refused != nullptr && absl::IsResourceExhausted(s)) *refused = std::move(plan);
    return s;
  }
  return plan;
}

}  // namespace tpusim::runtime::tpusim_backend
