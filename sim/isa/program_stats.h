#pragma once
// Static figures of a program, without running it: instructions per unit (loop bodies counted
// once, as written) and the highest VMEM byte any block reaches.

#include <cstdint>
#include <map>
#include <string>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

struct ProgramStats {
  uint64_t instructions = 0;
  std::map<std::string, uint64_t>
      per_unit;  // "dma", "mxu", "vpu", "infeed", "outfeed", "ici", "sequencer"
  uint64_t vmem_high_water_bytes = 0;
};

ProgramStats program_stats(const isa::Program& program);

}  // namespace tpusim::sim
