#pragma once
// The tpusim backend: compiles a graph to an ISA program (compiler.h) and runs it on the
// SystemC model of a slice (sim::System), one step per device-loop iteration; replica r runs on
// core r, in that core's share of its chip's HBM, fed over its chip's host link. Matmuls
// run on the MXUs (bf16 inputs, f32 accumulation, DEFAULT precision); everything else on the
// vector unit in f32. SystemC elaborates once per process, so one System serves every tpusim
// backend of the process; its slice is fixed by the first use.

#include <string>

#include "runtime/backend/backend.h"

namespace tpusim::runtime {

// `slice`: a slice config file or built-in name ("v3-8").
std::unique_ptr<Backend> make_tpusim_backend(const std::string& slice = "v3-8");
// The same with every BackendArgs field (a cycle cap).
std::unique_ptr<Backend> make_tpusim_backend(const BackendArgs& args);
// Its registry entry (registry.h).
const BackendDeclaration& tpusim_backend_declaration();

}  // namespace tpusim::runtime
