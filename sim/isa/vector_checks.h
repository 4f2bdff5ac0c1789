#pragma once
// The rules a vector instruction keeps, checked by the program validator (validator.h): a known
// op; the operands it takes and no others, each a VMEM block inside VMEM; f32 results (a cast
// may write bf16 or s32); operand shapes that fit the op (the same as dst, a row, a column, a
// reduction's or a transpose's). A CHAIN's steps keep the same rules one by one, and a chain
// holds 1 to 4096 steps and no transpose, RNG or chain among them.

#include <functional>
#include <string>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

// The most steps a chain may hold: a fused loop body (the compiler's largest, a BERT layer's
// gradient group, has a few hundred); the vector unit's costing compares each step's operands
// with the earlier steps' results, so a hostile chain must not be unbounded. The compiler keeps
// its fused groups within it (runtime/backend/tpusim: fused_group_fits).
inline constexpr int kMaxChainSteps = 4096;

struct VectorCheck {
  // Checks a VMEM block (inside VMEM, a known dtype, ...); false, having failed, when it is not.
  std::function<bool(const char* what, const isa::Block& block)> vmem_block;
  std::function<void(const std::string& reason)> fail;  // called once per broken rule
};

void check_vector_instruction(const isa::Vector& v, const VectorCheck& at);

}  // namespace tpusim::sim
