#include "sim/isa/program_stats.h"

#include <algorithm>

#include "sim/isa/ops.h"
#include "sim/isa/stream_bodies.h"
#include "sim/memory/block.h"

namespace tpusim::sim {

ProgramStats program_stats(const isa::Program& program) {
  ProgramStats stats;
  auto vmem = [&](const isa::Block& b) {
    stats.vmem_high_water_bytes = std::max(stats.vmem_high_water_bytes, end_address(b));
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
            vmem(in.matmul().lhs());
            vmem(in.matmul().out());
          } else {
            vmem(in.load_weights().weights());
          }
          break;
        case UnitKind::kVector:
          ++stats.per_unit["vpu"];
          vmem(in.vector().dst());
          if (in.vector().has_a()) vmem(in.vector().a());
          if (in.vector().has_b()) vmem(in.vector().b());
          if (in.vector().has_c()) vmem(in.vector().c());
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
