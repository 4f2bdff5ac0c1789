#include "runtime/backend/tpusim/step_emission.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "common/align.h"
#include "common/strings.h"
#include "runtime/backend/tpusim/emitter.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/backend/tpusim/schedule.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

Transfer transfer_for(const Node& n, int id, uint64_t hbm, uint64_t entry_budget) {
  Transfer t;
  t.name = n.attrs.name;
  t.node = id;
  t.hbm = hbm;
  t.dtype = n.dtype;
  t.shape = n.shape;
  t.cols = cols_of(n.shape);
  const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / t.cols;
  // Rows of f32 (the VMEM an entry is widened into, or sent from).
  t.rows_per_entry =
      std::max<uint64_t>(1, std::min<uint64_t>(rows, entry_budget / (uint64_t{t.cols} * 4)));
  return t;
}

// An infeed or output moves through VMEM whole rows at a time (from offset 0; a bf16 infeed's
// row lands above the f32 one it is widened into): one row must fit the core's VMEM.
absl::Status check_row_fits_vmem(const Transfer& t, const char* kind, uint64_t vmem_bytes) {
  const uint64_t f32_row = uint64_t{t.cols} * 4;
  const uint64_t row = t.link_bytes == 2 ? align_up(f32_row) + uint64_t{t.cols} * 2 : f32_row;
  if (row <= vmem_bytes) return absl::OkStatus();
  return absl::UnimplementedError(
      str_cat("tpusim backend: ", kind, " '", t.name, "' (", dtype_name(t.dtype), t.shape.str(),
              "): one row of ", row, " bytes does not fit the core's ", vmem_bytes,
              " bytes of VMEM, which the host link moves it through a row or more at a time"));
}

// Writes a planned step's program for one core: the infeeds, every fragment in emission order,
// the variable updates and the outputs, inside a device loop. One instance per compile.
class StepEmission {
 public:
  StepEmission(const Graph& graph, const config::SliceSpec& slice, uint32_t core,
               const StepOptions& options, const StepPlan& plan, CompiledStep& out)
      : graph_(graph),
        plan_(plan),
        out_(out),
        chip_hbm_bytes_(slice.chip.hbm.capacity_bytes),
        constants_base_(plan.hbm_base + align_up(out.plan.peak_bytes)),
        hbm_(constants_base_, constants_base_ + kConstantsRegion),
        b_(out.program.get(), core),
        core_(&out.program->cores(out.program->cores_size() - 1)),
        emit_(slice.chip, b_, flags_),
        l_{graph,
           out.plan,
           emit_,
           hbm_,
           options.precision,
           allocate_gemm_flags(flags_),
           options.replicas,
           options.allreduce,
           plan.overlapped,
           &plan.fusion,
           &plan.combined},
        entry_budget_(emit_.tile_budget_bytes() / 2) {
    hbm_.set_temporaries_base(constants_base_ + kConstantsRegion);
    out_.node_temporaries.assign(static_cast<size_t>(graph.size()), 0);
  }

  absl::Status emit() {
    out_.loop_instruction = b_.size();
    sim::InstrRef loop = b_.loop(1, [&] {});
    const int body_start = b_.size();
    if (absl::Status s = emit_infeeds(); !s.ok()) return s;
    for (int id : plan_.order) {
      if (!plan_.emits(id)) continue;
      if (absl::Status s = emit_fragment(id); !s.ok()) {
        return absl::Status(
            s.code(), str_cat(s.message(), " (node %", id, " '", graph_.node(id).label, "')"));
      }
    }
    if (absl::Status s = emit_updates_and_outputs(); !s.ok()) return s;
    loop.instruction().mutable_loop()->set_body_length(
        static_cast<uint32_t>(b_.size() - body_start));
    b_.set_origin("", "");
    b_.halt();
    return finish();
  }

 private:
  // Every node gets its own origin, named by its label; a label seen before gets "_1", "_2",
  // ... as TensorFlow numbers repeated op names.
  void set_origin(const std::string& label, const std::string& op) {
    const int n = label_uses_[label]++;
    b_.set_origin(n == 0 ? label : str_cat(label, "_", n), op);
  }

  // The HBM a node's fragment reads or writes as `id`, to see which overlapped collectives it
  // must wait for. Folded scalars and fused intermediates have no buffer; temporaries are the
  // compiler's own and no collective touches them.
  std::optional<HbmRange> range_of(int id) const {
    const int owner = out_.plan.owner[static_cast<size_t>(id)];
    if (!plan_.node(owner).materialized) return std::nullopt;
    const uint64_t at = l_.address(id);
    return HbmRange{at, at + buffer_bytes(graph_.node(owner))};
  }

  absl::Status emit_infeeds();
  void emit_infeed_entry(const Transfer& t, uint64_t r0, uint64_t rows, bool widen, uint32_t landed,
                         uint32_t widened);
  absl::Status emit_fragment(int id);
  const char* fragment_kind(int id) const;
  absl::Status lower(int id);
  absl::Status check_declared_hbm(int id, const char* kind, int begin,
                                  const std::vector<HbmRange>& reads,
                                  const std::vector<HbmRange>& writes) const;
  void mark_bf16_transfers(int id, int begin);
  absl::Status track_collective(const std::vector<HbmRange>& reads,
                                const std::vector<HbmRange>& writes, size_t summed);
  absl::Status emit_updates_and_outputs();
  absl::Status finish();

  const Graph& graph_;
  const StepPlan& plan_;
  CompiledStep& out_;
  const uint64_t chip_hbm_bytes_;
  const uint64_t constants_base_;  // the compiler's constants region, above the planned tensors
  CompilerHbm hbm_;
  sim::CoreBuilder b_;
  const isa::CoreProgram* core_;  // the stream b_ appends to
  FlagPool flags_;
  Emitter emit_;
  Lowering l_;
  const uint64_t entry_budget_;  // VMEM bytes an infeed or output entry may take
  std::map<std::string, int> label_uses_;
  CollectivesInFlight in_flight_;
};

// Infeeds: each entry lands in VMEM, then goes to the infeed's HBM buffer. A bf16 infeed's entries
// land as bf16 (half the host-link bytes) and are widened in VMEM to the f32 its buffer holds,
// standing in for the convert XLA fuses into the infeed's first reader (the graph's own Cast to
// f32 then aliases that buffer: widening_casts_as_aliases).
absl::Status StepEmission::emit_infeeds() {
  for (int id : graph_.infeeds()) {
    const Node& n = graph_.node(id);
    set_origin(n.attrs.name, "infeed");
    Transfer t = transfer_for(n, id, l_.address(id), entry_budget_);
    const bool widen = n.dtype == DType::kBF16;
    if (widen) t.link_bytes = 2;
    if (absl::Status s = check_row_fits_vmem(t, "infeed", emit_.vmem_capacity()); !s.ok()) return s;
    const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / t.cols;
    emit_.begin_fragment();
    const uint32_t landed = flags_.allocate();
    const uint32_t widened = widen ? flags_.allocate() : landed;
    for (uint64_t r0 = 0; r0 < rows; r0 += t.rows_per_entry)
      emit_infeed_entry(t, r0, rows, widen, landed, widened);
    out_.infeeds.push_back(t);
  }
  return absl::OkStatus();
}

// Rows [r0, r0 + t.rows_per_entry) of an infeed: dequeue, widen when bf16, store to HBM.
void StepEmission::emit_infeed_entry(const Transfer& t, uint64_t r0, uint64_t rows, bool widen,
                                     uint32_t landed, uint32_t widened) {
  const isa::DType dt = buffer_dtype(graph_.node(t.node));
  const uint64_t widened_bytes = align_up(t.rows_per_entry * t.cols * 4);
  const auto count = static_cast<uint32_t>(std::min(t.rows_per_entry, rows - r0));
  const isa::Block vmem = sim::block(0, count, t.cols, dt);
  const isa::Block arrival = widen ? sim::block(widened_bytes, count, t.cols, isa::BF16) : vmem;
  auto in = b_.infeed(arrival);
  emit_.ordered(in);
  flags_.signal(in, landed);
  if (widen) {
    auto cast = b_.cast(vmem, arrival);
    cast.wait(landed, flags_.count(landed));
    flags_.signal(cast, widened);
  }
  auto store = b_.dma_to_hbm(vmem, sim::block(t.hbm + r0 * t.cols * 4, count, t.cols, dt),
                             emit_.next_engine());
  store.wait(widened, flags_.count(widened));
  emit_.wrote_hbm(store);
  emit_.begin_fragment();  // the next entry reuses the VMEM
}

// One node's fragment: it first waits for the overlapped collectives whose buffers it touches,
// then is lowered, its bf16 result rounded when its lowering leaves f32 sums, its HBM accesses
// checked against the buffers it declared, its bf16 transfers charged as packed, and, when it is
// an overlapped all-reduce, tracked in flight.
absl::Status StepEmission::emit_fragment(int id) {
  const Node& node = graph_.node(id);
  const NodePlan& plan = plan_.node(id);
  hbm_.next_node();
  std::vector<HbmRange> reads, writes;
  for (int in : plan.reads) {
    if (auto r = range_of(in)) reads.push_back(*r);
  }
  for (int w : plan.writes) {  // a write through an alias writes no buffer of its own
    if (auto r = range_of(w); r && out_.plan.owner[static_cast<size_t>(w)] == w)
      writes.push_back(*r);
  }
  const uint64_t wait_for = in_flight_.needed(reads, writes);
  emit_.wait_for_collectives(wait_for);
  const int before = b_.size();
  absl::Status s = lower(id);
  out_.node_temporaries[static_cast<size_t>(id)] =
      hbm_.node_temporaries().end - hbm_.node_temporaries().begin;
  const char* kind = fragment_kind(id);
  if (s.ok() && emit_.status().ok()) s = check_declared_hbm(id, kind, before, reads, writes);
  mark_bf16_transfers(id, before);
  out_.instructions_per_op[kind] += static_cast<uint64_t>(b_.size() - before);
  // Only a fragment that waited orders what follows it after the collectives (a reshape of a
  // collective's result emits nothing, and its reader still has to wait).
  if (wait_for > 0 && emit_.collectives_waited()) in_flight_.retire(wait_for);
  // A combined all-reduce's root writes every member's sum.
  if (s.ok() && plan_.overlapped && node.op == Op::kCrossReplicaSum)
    s = track_collective(reads, writes, plan_.combined.members(id).size());
  return s.ok() ? emit_.status() : s;
}

// What node `id`'s fragment computes, as the op report names it: a fused convolution's or pool's
// kind, a product's when the fragment is the product's taking in its consumer, else the op.
const char* StepEmission::fragment_kind(int id) const {
  const auto fused = plan_.fusions.find(id);
  if (fused != plan_.fusions.end()) return fusion_kind_name(fused->second.kind);
  int product = plan_.fusion.node(id).consumes;
  if (const int producer = plan_.fusion.node(id).producer; producer >= 0)
    product = plan_.fusion.node(producer).consumes;
  if (product < 0) return op_name(graph_.node(id).op);
  const auto conv = plan_.fusions.find(product);
  return conv != plan_.fusions.end() ? fusion_kind_name(conv->second.kind) : "matmul";
}

// Lowers node `id` as its plan says: an elementwise group from its root, a fused convolution or
// pool, or the op's own lowering (lowering_rule); then rounds a bf16 result its fragment left as
// f32 sums.
absl::Status StepEmission::lower(int id) {
  const Node& node = graph_.node(id);
  const auto fused = plan_.fusions.find(id);
  absl::Status s;
  bool rounded = false;
  const int sibling = plan_.fusion.node(id).sibling;
  if (const int producer = plan_.fusion.node(id).producer; sibling >= 0 || producer >= 0) {
    set_origin(node.label, "fused");
    std::vector<std::vector<int>> reductions;
    if (sibling >= 0) reductions.push_back(plan_.fusion.reduction_members(sibling));
    reductions.push_back(plan_.fusion.reduction_members(id));
    const std::vector<int> produced =
        producer >= 0 ? plan_.fusion.members(producer) : std::vector<int>{};
    // An input gradient taking in the producer computes it and the reductions (fusion_plan.h).
    if (const int gradient = producer >= 0 ? plan_.fusion.node(producer).consumes : -1;
        gradient >= 0) {
      set_origin(graph_.node(gradient).label, fragment_kind(id));
      s = lower_conv_into_consumer(l_, gradient, plan_.fusions.at(gradient), reductions, produced);
      ++out_.fused_convolutions;
    } else {
      s = lower_sibling_reductions(l_, reductions, produced);
    }
    rounded = true;  // each bf16 sum rounded in the fragment
    for (const std::vector<int>& members : reductions) {
      if (members.size() > 1) out_.fused_nodes += members.size() - 1;
    }
    out_.fused_nodes += produced.size();
  } else if (const int product = plan_.fusion.node(id).consumes; product >= 0) {
    // A batched matmul or an input gradient computing this group from its products or image
    // gradients (fusion_plan.h).
    const std::vector<int> members = plan_.fusion.members(id);
    set_origin(graph_.node(product).label, fragment_kind(id));
    if (const auto conv = plan_.fusions.find(product); conv != plan_.fusions.end()) {
      s = lower_conv_into_consumer(l_, product, conv->second, {}, members);
      ++out_.fused_convolutions;
    } else if (node.op == Op::kTranspose) {  // a merge of the product's heads
      s = lower_matmul_into_merge(l_, product, id);
    } else {
      s = lower_matmul_into_consumer(l_, product, members);
    }
    rounded = true;  // the group's bf16 values rounded in the tile
    out_.fused_nodes += members.size();
  } else if (plan_.node(id).group == id) {
    const std::vector<int> members = plan_.fusion.members(id);
    set_origin(node.label, members.size() > 1 ? "fused" : op_name(node.op));
    s = lower_fused(l_, members);
    // The elementwise members (a fused reduction is counted in fused_reductions).
    const bool reduction = !is_elementwise(node.op);
    rounded = reduction;  // a fused reduction rounds a bf16 sum itself
    if (members.size() > 1) out_.fused_nodes += members.size() - (reduction ? 1 : 0);
  } else if (fused != plan_.fusions.end()) {
    set_origin(node.label, fusion_kind_name(fused->second.kind));
    rounded = fusion_rounds_output(fused->second.kind);
    if (is_convolution(fused->second.kind)) {
      s = lower_conv(l_, id, fused->second);
      ++out_.fused_convolutions;
    } else {
      s = lower_pool(l_, id, fused->second);
      ++out_.fused_pools;
    }
  } else {
    set_origin(node.label, op_name(node.op));
    const LoweringRule* rule = lowering_rule(node.op);
    if (rule == nullptr)
      return absl::UnimplementedError(
          str_cat("tpusim backend: no lowering for ", op_name(node.op)));
    s = rule->lower(l_, id);
    rounded = rule->rounds_bf16_output;
  }
  // A bf16 value summed in f32 (a matmul, a reduction) is rounded before anything reads it.
  if (s.ok() && leaves_f32_sums(node) && !rounded && out_.plan.owner[static_cast<size_t>(id)] == id)
    round_to_bf16_in_place(l_, id);
  return s;
}

// The fragment (instructions from `begin` on) touches only the HBM it may: the buffers its
// lowering declared (`reads`, `writes`), the compiler's constants and its node's temporaries.
absl::Status StepEmission::check_declared_hbm(int id, const char* kind, int begin,
                                              const std::vector<HbmRange>& reads,
                                              const std::vector<HbmRange>& writes) const {
  FragmentHbm allowed{reads, writes};
  allowed.writable.push_back(hbm_.node_temporaries());
  allowed.readable.insert(allowed.readable.end(), allowed.writable.begin(), allowed.writable.end());
  allowed.readable.push_back(hbm_.constants_range());
  return check_fragment_hbm(*core_, begin, b_.size(), allowed, id, kind);
}

// The fragment's transfers of bf16 buffers (instructions from `begin` on) cost what a TPU's
// packed bf16 ones do. A buffer's type is its owner's: a widening cast aliases a bf16 buffer
// (widening_casts_as_aliases), and its readers read bf16 from HBM, converting in registers.
void StepEmission::mark_bf16_transfers(int id, int begin) {
  std::vector<HbmRange> bf16_buffers;
  for (const std::vector<int>* uses : {&plan_.node(id).reads, &plan_.node(id).writes}) {
    for (int u : *uses) {
      if (graph_.node(out_.plan.owner[static_cast<size_t>(u)]).dtype != DType::kBF16) continue;
      if (auto r = range_of(u)) bf16_buffers.push_back(*r);
    }
  }
  if (!bf16_buffers.empty()) mark_packed_bf16(b_, begin, b_.size(), bf16_buffers);
}

// Later fragments learn from an overlapped all-reduce's ranges whether to wait for it: a
// collective without them would be waited for by nothing.
absl::Status StepEmission::track_collective(const std::vector<HbmRange>& reads,
                                            const std::vector<HbmRange>& writes, size_t summed) {
  if (reads.size() != summed || writes.size() != summed)
    return absl::InternalError("tpusim backend: an overlapped all-reduce without its buffers");
  in_flight_.started(flags_.count(emit_.collectives_done_flag()), reads, writes);
  return absl::OkStatus();
}

// The updates and outputs wait for every collective still in flight: they write variables and
// read results without the range checks of emit_fragment, and the step ends with them anyway.
// Outputs go HBM -> VMEM -> outfeed, entry by entry.
absl::Status StepEmission::emit_updates_and_outputs() {
  emit_.wait_for_collectives(in_flight_.latest());
  for (const auto& u : graph_.updates()) {
    const Node& v = graph_.node(u.variable);
    if (out_.plan.in_place[static_cast<size_t>(u.value)] == u.variable) continue;  // written there
    set_origin(v.label, "assign");
    emit_.copy(l_.address(u.value), 0, l_.address(u.variable), 0, 1,
               static_cast<uint32_t>(v.shape.elements()), buffer_dtype(v));
  }
  for (const auto& o : graph_.outputs()) {
    const Node& n = graph_.node(o.node);
    set_origin(o.name, "outfeed");
    Transfer t = transfer_for(n, o.node, l_.address(o.node), entry_budget_);
    t.name = o.name;
    if (absl::Status s = check_row_fits_vmem(t, "output", emit_.vmem_capacity()); !s.ok()) return s;
    const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / t.cols;
    const isa::DType dt = buffer_dtype(n);
    const uint32_t staged = flags_.allocate();
    for (uint64_t r0 = 0; r0 < rows; r0 += t.rows_per_entry) {
      emit_.begin_fragment();
      const auto count = static_cast<uint32_t>(std::min(t.rows_per_entry, rows - r0));
      const isa::Block vmem = sim::block(0, count, t.cols, dt);
      auto load = b_.dma_to_vmem(sim::block(t.hbm + r0 * t.cols * 4, count, t.cols, dt), vmem,
                                 emit_.next_engine());
      emit_.ordered(load);
      flags_.signal(load, staged);
      auto send = b_.outfeed(vmem);
      send.wait(staged, flags_.count(staged));
      emit_.wrote_hbm(send);  // the next entry reuses the VMEM
    }
    out_.outputs.push_back(t);
  }
  // The updates and outputs are fragments like the nodes': one that could not be emitted fails
  // the compile rather than leaving a variable unchanged.
  if (emit_.status().ok()) return absl::OkStatus();
  return absl::Status(emit_.status().code(),
                      str_cat(emit_.status().message(), " (the step's updates and outputs)"));
}

// The sync flags used, the constants the host writes before the run (the graph's, s32 ones as
// their bit patterns, and the compiler's own) and the core's HBM footprint.
absl::Status StepEmission::finish() {
  if (flags_.allocated() > sim::kNumFlags) {
    return absl::ResourceExhaustedError(str_cat("tpusim backend: the program needs ",
                                                flags_.allocated(), " sync flags; a core has ",
                                                sim::kNumFlags));
  }
  for (int id = 0; id < graph_.size(); ++id) {
    const Node& n = graph_.node(id);
    if (n.op != Op::kConstant) continue;
    std::vector<float> values = n.attrs.value.f;
    if (n.dtype == DType::kS32) {
      values.resize(n.attrs.value.i.size());
      std::memcpy(values.data(), n.attrs.value.i.data(), values.size() * 4);
    }
    out_.constants.emplace_back(l_.address(id), std::move(values));
  }
  for (const auto& c : hbm_.constants()) out_.constants.push_back(c);
  // The device's footprint (bf16 tensors at 2 bytes) against the core's share; the simulator's
  // own (4 bytes a value) against its span.
  const uint64_t extra = kConstantsRegion + hbm_.temporaries_peak();
  PlanRequest with_scratch = plan_.request;
  with_scratch.temporaries = out_.node_temporaries;
  out_.hbm_bytes = align_up(plan_hbm(graph_, plan_.hbm_base, &with_scratch).device_peak_bytes) +
                   kConstantsRegion;
  if (constants_base_ - plan_.hbm_base + extra > plan_.hbm_span) {
    return absl::InternalError(str_cat("tpusim backend: the step as the simulator holds it (",
                                       constants_base_ - plan_.hbm_base + extra,
                                       " bytes) outgrows its ", plan_.hbm_span,
                                       "-byte span of a core's HBM"));
  }
  if (out_.hbm_bytes > plan_.hbm_share) {
    return absl::ResourceExhaustedError(str_cat(
        "tpusim backend: the step needs ", out_.hbm_bytes,
        " bytes of HBM (its tensors and, beside them while each fragment runs, its scratch; ",
        plan_.hbm.device_peak_bytes, " for the tensors alone); a core has ", plan_.hbm_share,
        " (its share of the chip's ", chip_hbm_bytes_, ")"));
  }
  out_.program->set_name("step");
  return absl::OkStatus();
}

}  // namespace

absl::Status emit_step(const Graph& graph, const config::SliceSpec& slice, uint32_t core,
                       const StepOptions& options, const StepPlan& plan, CompiledStep& out) {
  StepEmission emission(graph, slice, core, options, plan, out);
  return emission.emit();
}

}  // namespace tpusim::runtime::tpusim_backend
