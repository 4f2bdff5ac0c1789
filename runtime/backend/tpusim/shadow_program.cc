#include "runtime/backend/tpusim/shadow_program.h"

#include <map>

#include "common/strings.h"

namespace tpusim::runtime::tpusim_backend {

absl::StatusOr<ShadowProgram> shadow_program(const isa::CoreProgram& step, int loop_instruction) {
  const auto& instrs = step.instructions();
  if (loop_instruction < 0 || loop_instruction >= instrs.size() ||
      !instrs[loop_instruction].has_loop()) {
    return absl::InternalError(
        str_cat("shadow program: instruction ", loop_instruction, " is not the device loop"));
  }
  const int body_end =
      loop_instruction + 1 + static_cast<int>(instrs[loop_instruction].loop().body_length());
  ShadowProgram shadow;
  shadow.program.set_shadow(true);
  std::map<uint32_t, uint32_t> origin_of;  // the step's origin -> the shadow's
  auto keep = [&](const isa::Instruction& in) {
    isa::Instruction* copy = shadow.program.add_instructions();
    *copy->mutable_collective() = in.collective();
    copy->set_note(in.note());
    if (in.origin() == 0) return;
    auto [it, added] = origin_of.emplace(in.origin(), shadow.program.origins_size() + 1);
    if (added) *shadow.program.add_origins() = step.origins(static_cast<int>(in.origin() - 1));
    copy->set_origin(it->second);
  };
  uint32_t body = 0;
  for (int i = 0; i < instrs.size(); ++i) {
    const isa::Instruction& in = instrs[i];
    if (i == loop_instruction) {
      shadow.loop_instruction = shadow.program.instructions_size();
      shadow.program.add_instructions()->mutable_loop()->set_count(1);
      continue;
    }
    const bool in_body = i > loop_instruction && i < body_end;
    if (in_body && in.has_loop()) {
      return absl::InternalError(
          str_cat("shadow program: the device loop holds another loop (instruction ", i, ")"));
    }
    if (!in.has_collective()) continue;
    keep(in);
    if (in_body) ++body;
  }
  if (body == 0) {
    // No collective in the step: nothing to loop over.
    auto* list = shadow.program.mutable_instructions();
    list->erase(list->begin() + shadow.loop_instruction);
    shadow.loop_instruction = -1;
  } else {
    shadow.program.mutable_instructions(shadow.loop_instruction)
        ->mutable_loop()
        ->set_body_length(body);
  }
  shadow.program.add_instructions()->mutable_halt();
  return shadow;
}

}  // namespace tpusim::runtime::tpusim_backend
