#pragma once
// Checks a program against the slice it will run on, before any of it runs. Each problem names
// the core, the instruction index, the operation and the rule; every problem of the program is
// reported at once. What static checks cannot see (a wait on a flag that only a later
// instruction of the same unit would signal, an infeed that never arrives) is diagnosed by the
// System at run time as a deadlock.
//
// Rules:
// - each core appears once and exists in the slice; each instruction has an operation;
// - blocks have a dtype, rows and cols > 0, an address and stride aligned to the element size,
//   rows that do not overlap (stride >= cols x element size), and lie inside their memory
//   (VMEM of the core, HBM of the chip);
// - DMA: a direction, src and dst of equal rows, cols and dtype, an engine the core has;
// - load_weights: an MXU the core has, slot 0 or 1, at most R x C weights of f32 or bf16;
// - matmul: an MXU and slot that were loaded earlier in the stream, lhs f32 or bf16 with as many
//   columns as the weights have rows, out f32 with lhs's rows and the weights' columns;
// - vector: a known op with operands of the shapes and dtypes the op needs (isa.proto);
// - loop: count >= 1, a body of >= 1 instructions that ends inside the stream (and inside any
//   enclosing loop's body);
// - shadow cores (replica folding): only loop, collective and halt, with no waits or signals,
//   standing for a core of the program that is not a shadow;
// - sync flags: indices below kNumFlags; every wait can be met by the signals of its segment
//   (flags reset at each loop boundary, so a segment is a run of instructions between them).

#include <absl/status/status.h>

#include "configs/slice_spec.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

absl::Status validate_program(const isa::Program& program, const config::SliceSpec& slice);

}  // namespace tpusim::sim
