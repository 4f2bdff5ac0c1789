#pragma once
// The tpusim compiler's last pass: a planned step (step_plan.h) written as one core's ISA
// program, inside a device loop: the infeeds, every fragment in emission order through the
// lowering rules (lowering.h), the variable updates and the outputs.

#include <cstdint>

#include <absl/status/status.h>

#include "configs/slice_spec.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/step_plan.h"

namespace tpusim::runtime::tpusim_backend {

// Writes `plan`'s program for `core` of `slice` into `out` (whose HBM plan is the plan's), with
// its transfers, per-node temporaries and figures. ResourceExhausted when the emitted step's
// scratch, flags or constants do not fit beside the planned tensors (out.node_temporaries then
// says what each node took, for a second plan).
absl::Status emit_step(const Graph& graph, const config::SliceSpec& slice, uint32_t core,
                       const StepOptions& options, const StepPlan& plan, CompiledStep& out);

}  // namespace tpusim::runtime::tpusim_backend
