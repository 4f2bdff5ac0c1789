#pragma once
// What one vector instruction costs the vector unit, computed from the instruction and the core
// config alone (docs/simulator.md, "The vector unit"):
//
// - a single op over E elements issues ceil(E / (lanes x sublanes)) vregs at 1 cycle each (a
//   divide and exp/log/tanh/rsqrt/erf at the config's cycles per vreg), and moves every block it
//   names through the VMEM ports (operands in, dst out);
// - a CHAIN (a fused loop body, isa.proto) issues its steps' ALU operations `vector_alus` a cycle
//   (the element slots' ALUs, [Norrie21]), divides and transcendentals at their cycles per vreg
//   after them; fills and broadcasts take no ALU (a splat and a sublane-broadcast load); it loads
//   each operand block no earlier step made once and stores the results not kept in registers.
//
// The unit's time for an instruction is the longer of its issue cycles and its VMEM transfer on
// the ports, its results out after the pipeline latency (plus the transcendental latency when it
// has such a step).

#include <cstdint>

#include "configs/slice_spec.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

struct VectorCost {
  uint64_t issue_cycles = 0;
  uint64_t vmem_bytes = 0;      // through the VMEM ports
  uint64_t elements = 0;        // worked through (the unit's "elements" stat)
  uint64_t flop_elements = 0;   // of arithmetic ops: the op profile's FLOPs (ops.h, is_arithmetic)
  bool transcendental = false;  // pays the transcendental latency
};

VectorCost vector_cost(const isa::Vector& v, const config::CoreSpec& core);

// Issue cycles of one vector instruction (before VMEM and latency): exposed for tests.
uint64_t vector_issue_cycles(const isa::Vector& v, const config::CoreSpec& core);

// The element count an op works through: its input for reductions, its output otherwise.
uint64_t work_elements(const isa::Vector& v);

}  // namespace tpusim::sim
