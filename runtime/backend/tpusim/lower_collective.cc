// cross_replica_sum as an ISA all-reduce over the replicas' cores; a combined group of them
// (allreduce_combiner.h) as one all-reduce over their buffers.
#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

absl::Status lower_cross_replica_sum(Lowering& l, int id) {
  if (l.replicas <= 1) return absl::OkStatus();  // shares its input's buffer
  const std::vector<int> members =
      l.combined != nullptr ? l.combined->members(id) : std::vector<int>{id};
  for (int m : members) {
    const Node& n = l.node(m);
    if (n.dtype == DType::kS32) {
      return absl::UnimplementedError(str_cat("tpusim backend: cross_replica_sum '", n.label,
                                              "' of s32 (the interconnect sums f32)"));
    }
  }
  const Node& n = l.node(id);
  l.emit.begin_fragment();
  sim::InstrRef sum = [&] {
    if (members.size() == 1) {
      return l.emit.builder().collective(isa::Collective::ALL_REDUCE, l.allreduce,
                                         l.address(n.inputs[0]), l.address(id),
                                         static_cast<uint64_t>(n.shape.elements()));
    }
    std::vector<isa::CollectivePart> parts;
    for (int m : members) {
      isa::CollectivePart& p = parts.emplace_back();
      p.set_src(l.address(l.node(m).inputs[0]));
      p.set_dst(l.address(m));
      p.set_elements(static_cast<uint64_t>(l.node(m).shape.elements()));
    }
    return l.emit.builder().combined_all_reduce(l.allreduce, parts);
  }();
  isa::Collective* c = sum.instruction().mutable_collective();
  // The torus algorithms run over every core of the slice: an empty group.
  if (l.allreduce == isa::Collective::RING || l.allreduce == isa::Collective::BIDIR_RING) {
    for (uint32_t r = 0; r < l.replicas; ++r) c->add_group(r);
  }
  sum.instruction().set_note(
      members.size() == 1 ? str_cat("cross_replica_sum '", n.label, "'")
                          : str_cat("cross_replica_sum of ", members.size(), " tensors combined, '",
                                    l.node(members.front()).label, "' to '", n.label, "'"));
  l.emit.ordered(sum);
  if (l.overlap_allreduce) {
    l.emit.overlapped_collective(sum);
  } else {
    l.emit.wrote_hbm(sum);
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
