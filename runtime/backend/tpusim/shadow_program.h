#pragma once
// Replica folding (CompileOptions::simulated_replicas): a folded replica's core runs a shadow of
// its step, the step's collectives alone in the same order and loop (isa CoreProgram.shadow).
// Its collectives have no waits or signals: the collective unit runs them in order, and each
// starts at the engine once every member has issued it, so a shadow joins each collective when
// the simulated replicas reach it, as its own replica would have (the replicas are symmetric).

#include <absl/status/statusor.h>

#include "sim/isa/isa.pb.h"

namespace tpusim::runtime::tpusim_backend {

struct ShadowProgram {
  isa::CoreProgram program;   // core and loop count are the caller's to set
  int loop_instruction = -1;  // the device loop, or -1 where the step has no collective
};

// The shadow of `step`, a compiled step whose device loop is instruction `loop_instruction`
// (compiler.h). Origins are kept for the collectives, so the per-op profile still names them.
absl::StatusOr<ShadowProgram> shadow_program(const isa::CoreProgram& step, int loop_instruction);

}  // namespace tpusim::runtime::tpusim_backend
