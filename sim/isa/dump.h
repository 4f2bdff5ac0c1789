#pragma once
// A readable listing of a program: one line per instruction with its index, operation,
// operands, waits and signals; loop bodies indented.
//
//   core 0 (42 instructions)
//        0  dma.hbm_to_vmem   hbm[0x0: 128x256 bf16] -> vmem[0x0: 128x256 bf16] engine 0  signal f0
//        1  mxu.load_weights  mxu0 slot0 vmem[0x0: 128x128 bf16]  wait f0>=1

#include <string>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

std::string dump_program(const isa::Program& program);
std::string describe_block(const char* memory, const isa::Block& b);

}  // namespace tpusim::sim
