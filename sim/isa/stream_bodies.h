#pragma once
// Where each core's instructions are: its own entry, or the entry it runs the instructions of
// (CoreProgram::instructions_from).

#include <map>
#include <vector>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

// Per entry of `program.cores()`, in order, the entry holding its instructions and origins:
// itself, or the entry whose core its instructions_from names (itself when no entry runs that
// core; validate_program reports it).
inline std::vector<const isa::CoreProgram*> stream_bodies(const isa::Program& program) {
  std::map<uint32_t, const isa::CoreProgram*> by_core;
  for (const auto& core : program.cores()) by_core.emplace(core.core(), &core);
  std::vector<const isa::CoreProgram*> out;
  for (const auto& core : program.cores()) {
    auto it = core.has_instructions_from() ? by_core.find(core.instructions_from()) : by_core.end();
    out.push_back(it != by_core.end() ? it->second : &core);
  }
  return out;
}

}  // namespace tpusim::sim
