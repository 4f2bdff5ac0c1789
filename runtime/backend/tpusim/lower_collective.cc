// cross_replica_sum as an ISA all-reduce over the replicas' cores.
#include "common/strings.h"
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

absl::Status lower_cross_replica_sum(Lowering& l, int id) {
  if (l.replicas <= 1) return absl::OkStatus();  // shares its input's buffer
  const Node& n = l.node(id);
  if (n.dtype == DType::kS32) {
    return absl::UnimplementedError(
        "tpusim backend: cross_replica_sum of s32 (the interconnect sums f32)");
  }
  l.emit.begin_fragment();
  sim::InstrRef sum =
      l.emit.builder().collective(isa::Collective::ALL_REDUCE, l.allreduce, l.address(n.inputs[0]),
                                  l.address(id), static_cast<uint64_t>(n.shape.elements()));
  isa::Collective* c = sum.instruction().mutable_collective();
  // The torus algorithms run over every core of the slice: an empty group.
  if (l.allreduce == isa::Collective::RING || l.allreduce == isa::Collective::BIDIR_RING) {
    for (uint32_t r = 0; r < l.replicas; ++r) c->add_group(r);
  }
  sum.instruction().set_note(str_cat("cross_replica_sum '", n.label, "'"));
  l.emit.ordered(sum);
  if (l.overlap_allreduce) {
    l.emit.overlapped_collective(sum);
  } else {
    l.emit.wrote_hbm(sum);
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
