#pragma once
// Names and classes of ISA operations, shared by the validator, the dump, the units and traces.

#include <cstdint>
#include <string>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

// Sync flags per core: waits and signals name flags 0 .. kNumFlags - 1.
inline constexpr uint32_t kNumFlags = 256;
// Weight buffers per MXU.
inline constexpr uint32_t kWeightSlots = 2;

// Passes a matmul of this precision streams its rows through the array: DEFAULT one bf16 pass,
// HIGH three (bf16x3), HIGHEST six (bf16x6), as XLA's TPU backend emulates f32 products.
constexpr int mxu_passes(isa::Precision p) {
  return p == isa::HIGH ? 3 : p == isa::HIGHEST ? 6 : 1;
}

// A matmul's groups (isa.proto, Matmul.groups): 1 when it has none.
inline uint32_t matmul_groups(const isa::Matmul& mm) { return mm.groups() > 1 ? mm.groups() : 1; }
// Group g's lhs and out blocks.
isa::Block group_lhs(const isa::Matmul& mm, uint32_t g);
isa::Block group_out(const isa::Matmul& mm, uint32_t g);
// One past the last byte the last group's lhs (out) touches, without copying a block: for the
// MXU's per-instruction path.
uint64_t groups_lhs_end(const isa::Matmul& mm);
uint64_t groups_out_end(const isa::Matmul& mm);

// Which unit of a core runs an instruction (the sequencer itself runs loops and halts).
enum class UnitKind { kSequencer, kDma, kMxu, kVector, kInfeed, kOutfeed, kCollective };

UnitKind unit_of(const isa::Instruction& instr);
// Stable names for dumps, traces and messages: "dma.hbm_to_vmem", "mxu.matmul", "vpu.add", ...
const char* op_name(const isa::Instruction& instr);
const char* vector_op_name(isa::Vector::Op op);
// "all_reduce", "ring", ...
const char* collective_kind_name(isa::Collective::Kind kind);
const char* collective_algorithm_name(isa::Collective::Algorithm algorithm);
// The algorithm collective_algorithm_name calls `name` (ring, bidir_ring, torus2d, torus); false
// for any other name.
bool collective_algorithm_named(const std::string& name, isa::Collective::Algorithm* algorithm);

enum class VectorOpClass {
  kBinary,
  kUnary,
  kSelect,
  kCast,
  kReduce,
  kTranspose,
  kBroadcast,
  kFill,
  kChain,  // its steps' classes count
  kUnknown
};
VectorOpClass classify(isa::Vector::Op op);
// exp, log, tanh, rsqrt, erf: the transcendental unit's cost and latency.
bool is_transcendental(isa::Vector::Op op);
// Counts as one FLOP per element in the op profile: arithmetic, comparisons, select and
// reductions; copies, casts, transposes, broadcasts, fills and RNG move data and count none.
bool is_arithmetic(isa::Vector::Op op);

}  // namespace tpusim::sim
