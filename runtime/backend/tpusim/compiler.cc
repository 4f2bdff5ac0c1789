#include "runtime/backend/tpusim/compiler.h"

#include <cstring>
#include <memory>
#include <optional>

#include "common/strings.h"
#include "runtime/backend/tpusim/emitter.h"
#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/backend/tpusim/schedule.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

CompilerHbm::CompilerHbm(uint64_t constants_base, uint64_t constants_limit)
    : const_top_(constants_base), const_limit_(constants_limit) {}

uint64_t CompilerHbm::constant(const std::vector<float>& values) {
  for (const auto& [at, v] : constants_) {
    if (v == values) return at;
  }
  const uint64_t at = const_top_;
  const_top_ += (values.size() * 4 + 4095) / 4096 * 4096;
  constants_.emplace_back(at, values);
  return at;
}

uint64_t CompilerHbm::temporary(uint64_t bytes) {
  const uint64_t at = temp_base_ + temp_top_;
  temp_top_ += (bytes + 4095) / 4096 * 4096;
  temp_peak_ = std::max(temp_peak_, temp_top_);
  return at;
}

namespace {

constexpr uint64_t kConstantsRegion = 64ull << 20;  // room for the compiler's own constants

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
  const uint64_t row =
      t.link_bytes == 2 ? (f32_row + 4095) / 4096 * 4096 + uint64_t{t.cols} * 2 : f32_row;
  if (row <= vmem_bytes) return absl::OkStatus();
  return absl::UnimplementedError(
      str_cat("tpusim backend: ", kind, " '", t.name, "' (", dtype_name(t.dtype), t.shape.str(),
              "): one row of ", row, " bytes does not fit the core's ", vmem_bytes,
              " bytes of VMEM, which the host link moves it through a row or more at a time"));
}

absl::Status lower_node(Lowering& l, int id) {
  const Node& n = l.node(id);
  if (is_elementwise(n.op)) return lower_elementwise(l, id);
  switch (n.op) {
    case Op::kConstant:
    case Op::kVariable:
    case Op::kInfeed:  // in HBM already
    case Op::kReshape:
    case Op::kStopGradient:  // share their input's buffer
      return absl::OkStatus();
    case Op::kCrossReplicaSum:
      return lower_cross_replica_sum(l, id);
    case Op::kBroadcast:
      return lower_broadcast(l, id);
    case Op::kReduceSum:
    case Op::kReduceMax:
      return lower_reduce(l, id);
    case Op::kArgMax:
      return lower_argmax(l, id);
    case Op::kOneHot:
      return lower_one_hot(l, id);
    case Op::kRngUniform:
      return lower_rng(l, id);
    case Op::kTranspose:
      return lower_transpose(l, id);
    case Op::kConcat:
      return lower_concat(l, id);
    case Op::kSlice:
      return lower_slice(l, id);
    case Op::kPad:
      return lower_pad(l, id);
    case Op::kMatMul:
      return lower_matmul(l, id);
    case Op::kExtractPatches:
      return lower_extract_patches(l, id);
    case Op::kPatchesToImage:
      return lower_patches_to_image(l, id);
    default:  // the elementwise ops, handled above
      break;
  }
  return absl::UnimplementedError(str_cat("tpusim backend: no lowering for ", op_name(n.op)));
}

// Buffers hold bf16 values as f32, so a cast from bf16 to f32 changes no bit: compiled as a
// reshape to its own shape it aliases its input's buffer and emits nothing (and a convolution
// reading it reads the bf16 infeed directly), as XLA fuses the convert into the reader. Null
// when the graph has no such cast.
std::unique_ptr<Graph> widening_casts_as_aliases(const Graph& graph) {
  std::unique_ptr<Graph> out;
  for (int id = 0; id < graph.size(); ++id) {
    const Node& n = graph.node(id);
    if (n.op != Op::kCast || n.dtype != DType::kF32 ||
        graph.node(n.inputs[0]).dtype != DType::kBF16) {
      continue;
    }
    if (out == nullptr) out = std::make_unique<Graph>(graph);
    out->mutable_node(id).op = Op::kReshape;
  }
  return out;
}

}  // namespace

absl::StatusOr<CompiledStep> compile_graph(const Graph& given, const config::SliceSpec& slice,
                                           uint32_t core, const StepOptions& options) {
  const std::unique_ptr<Graph> aliased = widening_casts_as_aliases(given);
  const Graph& graph = aliased != nullptr ? *aliased : given;
  CompiledStep out;
  const uint32_t replicas = options.replicas;
  const bool overlapped = options.overlap_allreduce && replicas > 1;
  // Which nodes get fragments (dead ones and folded scalars do not), which fuse, and so where
  // each buffer is read: the HBM plan follows the order fragments really run in.
  Fusions fusions;
  {
    const std::vector<bool> unfused = needed_nodes(graph, {});
    if (options.fuse_convolutions) fusions = find_conv_fusions(graph, unfused, slice.chip.core);
    if (options.fuse_pools) fusions.merge(find_pool_fusions(graph, unfused, slice.chip.core));
  }
  // The fused convolutions read images, gradients and kernels, not patches, and the fused pools
  // images, pooled values and gradients: patches (and the pools' masks) that no other fragment
  // reads are needed no more and live in VMEM alone, or nowhere. Convolution patches still
  // needed are written by their forward convolution, not by a fragment of their own.
  FusionOptions fusion_options;
  fusion_options.fuse_reductions = options.fuse_reductions;
  fusion_options.recompute = options.recompute_shared_producers;
  const FusionPlan fp = plan_fusions(graph, fusions, slice.chip.core, fusion_options);
  const std::vector<bool>& needed = fp.needed;
  const std::vector<int>& group = fp.group;
  out.fused_reductions = fp.fused_reductions;
  out.recomputed_nodes = fp.recomputed_nodes;
  std::vector<bool> absorbed(static_cast<size_t>(graph.size()), false);
  for (auto& [id, fused] : fusions) {
    if (fused.kind != Fusion::Kind::kConvForward && fused.kind != Fusion::Kind::kConvInputGrad)
      continue;
    absorbed[static_cast<size_t>(fused.patches)] = true;
    fused.patches_kept = needed[static_cast<size_t>(fused.patches)];
  }
  for (int id = 0; id < graph.size(); ++id) {
    if (fp.absorbed(id)) absorbed[static_cast<size_t>(id)] = true;
  }
  // The cross_replica_sums XLA would combine, each group one all-reduce where its last member
  // runs.
  const CombinedAllReduces combined =
      replicas > 1 ? CombinedAllReduces(graph, needed, overlapped, options.combine)
                   : CombinedAllReduces();
  out.combined_allreduces = combined.groups();
  out.combined_sums = combined.sums();
  PlanRequest request;
  request.replicas = replicas;
  request.order = emission_order(graph, overlapped, &combined);
  request.overlapped_collectives = overlapped;
  request.materialized.assign(static_cast<size_t>(graph.size()), true);
  request.reads.resize(static_cast<size_t>(graph.size()));
  for (int id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    const int root = group[static_cast<size_t>(id)];
    const bool source =
        node.op == Op::kVariable || node.op == Op::kConstant || node.op == Op::kInfeed;
    if (!needed[static_cast<size_t>(id)] && !source)
      request.materialized[static_cast<size_t>(id)] = false;
    if (root >= 0 && root != id) request.materialized[static_cast<size_t>(id)] = false;
    if (fp.absorbed(id)) request.materialized[static_cast<size_t>(id)] = false;
    if (!needed[static_cast<size_t>(id)] || fp.absorbed(id)) continue;
    // What the fragment really reads: folded broadcasts' inputs, recomputed nodes' inputs.
    std::vector<int> reads;
    for (int in : fragment_reads(graph, fusions, id)) {
      for (int s : fp.sources(graph, in)) reads.push_back(s);
    }
    if (const auto fused = fusions.find(id); fused != fusions.end() && fused->second.patches_kept)
      reads.push_back(fused->second.patches);  // it writes them: they are live through it
    // A combined all-reduce's fragment, its root's, reads every member's input.
    const int combined_root = combined.root(id);
    for (int in : reads) {
      const int reader = combined_root >= 0 ? combined_root : root >= 0 ? root : id;
      if (root >= 0 && group[static_cast<size_t>(in)] == root) continue;  // inside the group
      request.reads[static_cast<size_t>(reader)].push_back(in);
    }
  }
  // Each core of a chip owns an equal share of the chip's HBM, as a v3 core owns 16 of its chip's
  // 32 GiB; the core's buffers live in its share.
  const uint64_t share = slice.chip.hbm.capacity_bytes / slice.chip.tensor_cores;
  const uint64_t base = (core % slice.chip.tensor_cores) * share;
  out.hbm_base = base;
  out.plan = plan_hbm(graph, base, &request);
  if (out.plan.peak_bytes + kConstantsRegion > share) {
    int largest = 0;
    for (int id = 0; id < graph.size(); ++id) {
      if (graph.node(id).shape.elements() > graph.node(largest).shape.elements()) largest = id;
    }
    const Node& big = graph.node(largest);
    return absl::ResourceExhaustedError(str_cat(
        "tpusim backend: the step's tensors need ", out.plan.peak_bytes,
        " bytes of HBM at their peak (the largest: ", op_name(big.op), " '", big.label, "' ",
        dtype_name(big.dtype), big.shape.str(), ", ", buffer_bytes(big), " bytes); a core has ",
        share, " (its share of the chip's ", slice.chip.hbm.capacity_bytes, ")"));
  }
  const uint64_t constants_base = base + (out.plan.peak_bytes + 4095) / 4096 * 4096;
  CompilerHbm hbm(constants_base, constants_base + kConstantsRegion);
  hbm.set_temporaries_base(constants_base + kConstantsRegion);

  sim::CoreBuilder b(out.program.get(), core);
  FlagPool flags;
  Emitter emit(slice.chip.core, b, flags);
  Lowering l{graph,     out.plan,          emit,
             hbm,       options.precision, allocate_gemm_flags(flags),
             replicas,  options.allreduce, overlapped,
             fp.folded, &combined};
  const uint64_t entry_budget = emit.tile_budget_bytes() / 2;

  // Every node gets its own origin, named by its label; a label seen before gets "_1", "_2",
  // ... as TensorFlow numbers repeated op names.
  std::map<std::string, int> label_uses;
  auto set_origin = [&](const std::string& label, const std::string& op) {
    const int n = label_uses[label]++;
    b.set_origin(n == 0 ? label : str_cat(label, "_", n), op);
  };
  out.loop_instruction = b.size();
  sim::InstrRef loop = b.loop(1, [&] {});
  const int body_start = b.size();
  // Infeeds: each entry lands in VMEM, then goes to the infeed's HBM buffer. A bf16 infeed's
  // entries land as bf16 (half the host-link bytes) and are widened in VMEM to the f32 its
  // buffer holds, standing in for the convert XLA fuses into the infeed's first reader (the
  // graph's own Cast to f32 then aliases that buffer: widening_casts_as_aliases).
  for (int id : graph.infeeds()) {
    const Node& n = graph.node(id);
    set_origin(n.attrs.name, "infeed");
    Transfer t = transfer_for(n, id, l.address(id), entry_budget);
    const bool widen = n.dtype == DType::kBF16;
    if (widen) t.link_bytes = 2;
    if (absl::Status s = check_row_fits_vmem(t, "infeed", emit.vmem_capacity()); !s.ok()) return s;
    const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / t.cols;
    const isa::DType dt = buffer_dtype(n);
    emit.begin_fragment();
    const uint32_t landed = flags.allocate();
    const uint32_t widened = widen ? flags.allocate() : landed;
    const uint64_t widened_bytes = (t.rows_per_entry * t.cols * 4 + 4095) / 4096 * 4096;
    for (uint64_t r0 = 0; r0 < rows; r0 += t.rows_per_entry) {
      const auto count = static_cast<uint32_t>(std::min(t.rows_per_entry, rows - r0));
      const isa::Block vmem = sim::block(0, count, t.cols, dt);
      const isa::Block arrival = widen ? sim::block(widened_bytes, count, t.cols, isa::BF16) : vmem;
      auto in = b.infeed(arrival);
      emit.ordered(in);
      flags.signal(in, landed);
      if (widen) {
        auto cast = b.cast(vmem, arrival);
        cast.wait(landed, flags.count(landed));
        flags.signal(cast, widened);
      }
      auto store = b.dma_to_hbm(vmem, sim::block(t.hbm + r0 * t.cols * 4, count, t.cols, dt),
                                emit.next_engine());
      store.wait(widened, flags.count(widened));
      emit.wrote_hbm(store);
      emit.begin_fragment();  // the next entry reuses the VMEM
    }
    out.infeeds.push_back(t);
  }
  // The HBM a node's fragment reads and writes, to see which overlapped collectives it must wait
  // for. Folded scalars and fused intermediates have no buffer; temporaries are the compiler's
  // own and no collective touches them.
  auto range_of = [&](int id) -> std::optional<HbmRange> {
    const int owner = out.plan.owner[static_cast<size_t>(id)];
    if (!request.materialized[static_cast<size_t>(owner)]) return std::nullopt;
    const uint64_t at = l.address(id);
    return HbmRange{at, at + buffer_bytes(graph.node(owner))};
  };
  CollectivesInFlight in_flight;
  for (int id : request.order) {
    if (!needed[static_cast<size_t>(id)] || absorbed[static_cast<size_t>(id)]) continue;
    const int root = group[static_cast<size_t>(id)];
    if (root >= 0 && root != id) continue;  // computed with its group's root
    if (combined.root(id) >= 0 && combined.root(id) != id) continue;  // summed with its root's
    const auto fused = fusions.find(id);
    hbm.next_node();
    const bool collective = overlapped && graph.node(id).op == Op::kCrossReplicaSum;
    // The sums a combined all-reduce's root writes (just the node itself otherwise).
    const std::vector<int> summed =
        graph.node(id).op == Op::kCrossReplicaSum ? combined.members(id) : std::vector<int>{id};
    std::vector<HbmRange> reads, writes;
    for (int in : request.reads[static_cast<size_t>(id)]) {
      if (auto r = range_of(in)) reads.push_back(*r);
    }
    for (int m : summed) {  // a combined all-reduce writes every member's result
      if (auto w = range_of(m); w && out.plan.owner[static_cast<size_t>(m)] == m) {
        writes.push_back(*w);
      }
    }
    if (fused != fusions.end() && fused->second.patches_kept) {
      if (auto w = range_of(fused->second.patches)) writes.push_back(*w);
    }
    const uint64_t wait_for = in_flight.needed(reads, writes);
    emit.wait_for_collectives(wait_for);
    const int before = b.size();
    absl::Status s;
    if (root == id) {
      const std::vector<int> members = fp.members(id);
      set_origin(graph.node(id).label, members.size() > 1 ? "fused" : op_name(graph.node(id).op));
      s = lower_fused(l, members);
      // The elementwise members (a fused reduction is counted in fused_reductions).
      const bool reduction = !is_elementwise(graph.node(id).op);
      if (members.size() > 1) out.fused_nodes += members.size() - (reduction ? 1 : 0);
    } else if (fused != fusions.end()) {
      set_origin(graph.node(id).label, fusion_kind_name(fused->second.kind));
      if (is_convolution(fused->second.kind)) {
        s = lower_conv(l, id, fused->second);
        ++out.fused_convolutions;
      } else {
        s = lower_pool(l, id, fused->second);
        ++out.fused_pools;
      }
    } else {
      set_origin(graph.node(id).label, op_name(graph.node(id).op));
      s = lower_node(l, id);
    }
    // A bf16 value summed in f32 (a matmul, a reduction) is rounded before anything reads it.
    if (s.ok() && leaves_f32_sums(graph.node(id)) && !l.output_rounded &&
        out.plan.owner[static_cast<size_t>(id)] == id)
      round_to_bf16_in_place(l, id);
    l.output_rounded = false;
    // The fragment's transfers of bf16 buffers cost what a TPU's packed bf16 ones do.
    std::vector<HbmRange> bf16_buffers;
    for (int in : request.reads[static_cast<size_t>(id)]) {
      if (graph.node(in).dtype != DType::kBF16) continue;
      if (auto r = range_of(in)) bf16_buffers.push_back(*r);
    }
    if (graph.node(id).dtype == DType::kBF16) {
      if (auto r = range_of(id)) bf16_buffers.push_back(*r);
    }
    if (!bf16_buffers.empty()) mark_packed_bf16(b, before, b.size(), bf16_buffers);
    const char* kind =
        fused != fusions.end() ? fusion_kind_name(fused->second.kind) : op_name(graph.node(id).op);
    out.instructions_per_op[kind] += static_cast<uint64_t>(b.size() - before);
    // Only a fragment that waited orders what follows it after the collectives (a reshape of a
    // collective's result emits nothing, and its reader still has to wait).
    if (wait_for > 0 && emit.collectives_waited()) in_flight.retire(wait_for);
    if (collective && s.ok()) {
      // Later fragments learn from these ranges whether to wait for it: a collective without
      // them would be waited for by nothing.
      if (reads.size() != summed.size() || writes.size() != summed.size()) {
        s = absl::InternalError("tpusim backend: an overlapped all-reduce without its buffers");
      } else {
        in_flight.started(flags.count(emit.collectives_done_flag()), reads, writes);
      }
    }
    if (s.ok()) s = emit.status();
    if (!s.ok()) {
      return absl::Status(s.code(),
                          str_cat(s.message(), " (node %", id, " '", graph.node(id).label, "')"));
    }
  }
  // The updates and outputs wait for every collective still in flight: they write variables and
  // read results without the range checks above, and the step ends with them anyway.
  emit.wait_for_collectives(in_flight.latest());
  for (const auto& u : graph.updates()) {
    const Node& v = graph.node(u.variable);
    set_origin(v.label, "assign");
    emit.copy(l.address(u.value), 0, l.address(u.variable), 0, 1,
              static_cast<uint32_t>(v.shape.elements()), buffer_dtype(v));
  }
  // Outputs: HBM -> VMEM -> outfeed, entry by entry.
  for (const auto& o : graph.outputs()) {
    const Node& n = graph.node(o.node);
    set_origin(o.name, "outfeed");
    Transfer t = transfer_for(n, o.node, l.address(o.node), entry_budget);
    t.name = o.name;
    if (absl::Status s = check_row_fits_vmem(t, "output", emit.vmem_capacity()); !s.ok()) return s;
    const uint64_t rows = static_cast<uint64_t>(n.shape.elements()) / t.cols;
    const isa::DType dt = buffer_dtype(n);
    const uint32_t staged = flags.allocate();
    for (uint64_t r0 = 0; r0 < rows; r0 += t.rows_per_entry) {
      emit.begin_fragment();
      const auto count = static_cast<uint32_t>(std::min(t.rows_per_entry, rows - r0));
      const isa::Block vmem = sim::block(0, count, t.cols, dt);
      auto load = b.dma_to_vmem(sim::block(t.hbm + r0 * t.cols * 4, count, t.cols, dt), vmem,
                                emit.next_engine());
      emit.ordered(load);
      flags.signal(load, staged);
      auto send = b.outfeed(vmem);
      send.wait(staged, flags.count(staged));
      emit.wrote_hbm(send);  // the next entry reuses the VMEM
    }
    out.outputs.push_back(t);
  }
  // The updates and outputs are fragments like the nodes': one that could not be emitted fails
  // the compile rather than leaving a variable unchanged.
  if (!emit.status().ok()) {
    return absl::Status(emit.status().code(),
                        str_cat(emit.status().message(), " (the step's updates and outputs)"));
  }
  loop.instruction().mutable_loop()->set_body_length(static_cast<uint32_t>(b.size() - body_start));
  b.set_origin("", "");
  b.halt();
  if (flags.allocated() > sim::kNumFlags) {
    return absl::ResourceExhaustedError(str_cat("tpusim backend: the program needs ",
                                                flags.allocated(), " sync flags; a core has ",
                                                sim::kNumFlags));
  }
  for (int id = 0; id < graph.size(); ++id) {
    const Node& n = graph.node(id);
    if (n.op == Op::kConstant) {
      std::vector<float> values = n.attrs.value.f;
      if (n.dtype == DType::kS32) {
        // s32 constants keep their bit patterns: the host writes them as raw 32-bit words.
        values.resize(n.attrs.value.i.size());
        std::memcpy(values.data(), n.attrs.value.i.data(), values.size() * 4);
      }
      out.constants.emplace_back(l.address(id), std::move(values));
    }
  }
  for (const auto& c : hbm.constants()) out.constants.push_back(c);
  out.hbm_bytes = constants_base - base + kConstantsRegion + hbm.temporaries_peak();
  if (out.hbm_bytes > share) {
    return absl::ResourceExhaustedError(
        str_cat("tpusim backend: the step needs ", out.hbm_bytes, " bytes of HBM; a core has ",
                share, " (its share of the chip's ", slice.chip.hbm.capacity_bytes, ")"));
  }
  out.program->set_name("step");
  return out;
}

}  // namespace tpusim::runtime::tpusim_backend
