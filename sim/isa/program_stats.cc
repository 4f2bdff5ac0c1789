#include "sim/isa/program_stats.h"

#include <algorithm>
#include <functional>

#include "sim/isa/ops.h"
#include "sim/isa/stream_bodies.h"
#include "sim/memory/block.h"

namespace tpusim::sim {

ProgramStats program_stats(const isa::Program& program) {
  ProgramStats stats;
  auto vmem = [&](const isa::Block& b) {
    stats.vmem_high_water_bytes = std::max(stats.vmem_high_water_bytes, end_address(b));
  };
  // A vector op's blocks; a chain's steps' (a chain names none of its own).
  std::function<void(const isa::Vector&)> vector_blocks = [&](const isa::Vector& v) {
    if (v.op() == isa::Vector::CHAIN) {
      for (const isa::Vector& step : v.steps()) vector_blocks(step);
      return;
    }
    vmem(v.dst());
    if (v.has_a()) vmem(v.a());
    if (v.has_b()) vmem(v.b());
    if (v.has_c()) vmem(v.c());
  };
  for (const isa::CoreProgram* core : stream_bodies(program)) {
    for (const auto& in : core->instructions()) {
      ++stats.instructions;
      switch (unit_of(in)) {
        case UnitKind::kDma:
          ++stats.per_unit["dma"];
          vmem(in.dma().direction() == isa::Dma::HBM_TO_VMEM ? in.dma().dst() : in.dma().src());
          break;
        case UnitKind::kMxu:
          ++stats.per_unit["mxu"];
          if (in.has_matmul()) {
            const uint32_t last = matmul_groups(in.matmul()) - 1;
            vmem(group_lhs(in.matmul(), last));
            vmem(group_out(in.matmul(), last));
          } else {
            vmem(in.load_weights().weights());
          }
          break;
        case UnitKind::kVector:
          ++stats.per_unit["vpu"];
          vector_blocks(in.vector());
          break;
        case UnitKind::kInfeed:
          ++stats.per_unit["infeed"];
          vmem(in.infeed().dst());
          break;
        case UnitKind::kCollective:
          ++stats.per_unit["ici"];
          break;
        case UnitKind::kOutfeed:
          ++stats.per_unit["outfeed"];
          vmem(in.outfeed().src());
          break;
        case UnitKind::kSequencer:
          ++stats.per_unit["sequencer"];
          break;
      }
    }
  }
  return stats;
}

}  // namespace tpusim::sim
