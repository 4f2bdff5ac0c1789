#include "sim/isa/ops.h"

#include "sim/memory/block.h"

namespace tpusim::sim {

using isa::Instruction;
using isa::Vector;

isa::Block group_lhs(const isa::Matmul& mm, uint32_t g) {
  return shifted(mm.lhs(), uint64_t{g} * mm.lhs_group_stride_bytes());
}

isa::Block group_out(const isa::Matmul& mm, uint32_t g) {
  return shifted(mm.out(), uint64_t{g} * mm.out_group_stride_bytes());
}

uint64_t groups_lhs_end(const isa::Matmul& mm) {
  return end_address(mm.lhs()) + uint64_t{matmul_groups(mm) - 1} * mm.lhs_group_stride_bytes();
}

uint64_t groups_out_end(const isa::Matmul& mm) {
  return end_address(mm.out()) + uint64_t{matmul_groups(mm) - 1} * mm.out_group_stride_bytes();
}

UnitKind unit_of(const Instruction& instr) {
  switch (instr.op_case()) {
    case Instruction::kDma:
      return UnitKind::kDma;
    case Instruction::kLoadWeights:
    case Instruction::kMatmul:
      return UnitKind::kMxu;
    case Instruction::kVector:
      return UnitKind::kVector;
    case Instruction::kInfeed:
      return UnitKind::kInfeed;
    case Instruction::kOutfeed:
      return UnitKind::kOutfeed;
    case Instruction::kCollective:
      return UnitKind::kCollective;
    default:
      return UnitKind::kSequencer;
  }
}

const char* op_name(const Instruction& instr) {
  switch (instr.op_case()) {
    case Instruction::kDma:
      return instr.dma().direction() == isa::Dma::VMEM_TO_HBM ? "dma.vmem_to_hbm"
                                                              : "dma.hbm_to_vmem";
    case Instruction::kLoadWeights:
      return "mxu.load_weights";
    case Instruction::kMatmul:
      return "mxu.matmul";
    case Instruction::kVector:
      return vector_op_name(instr.vector().op());
    case Instruction::kInfeed:
      return "infeed.dequeue";
    case Instruction::kOutfeed:
      return "outfeed.enqueue";
    case Instruction::kCollective:
      switch (instr.collective().kind()) {
        case isa::Collective::ALL_REDUCE:
          return "ici.all_reduce";
        case isa::Collective::REDUCE_SCATTER:
          return "ici.reduce_scatter";
        case isa::Collective::ALL_GATHER:
          return "ici.all_gather";
        case isa::Collective::PERMUTE:
          return "ici.permute";
        default:
          return "ici.(no kind)";
      }
    case Instruction::kLoop:
      return "loop";
    case Instruction::kHalt:
      return "halt";
    default:
      return "(no operation)";
  }
}

const char* collective_kind_name(isa::Collective::Kind kind) {
  switch (kind) {
    case isa::Collective::ALL_REDUCE:
      return "all_reduce";
    case isa::Collective::REDUCE_SCATTER:
      return "reduce_scatter";
    case isa::Collective::ALL_GATHER:
      return "all_gather";
    case isa::Collective::PERMUTE:
      return "permute";
    default:
      return "unspecified";
  }
}

const char* collective_algorithm_name(isa::Collective::Algorithm algorithm) {
  switch (algorithm) {
    case isa::Collective::BIDIR_RING:
      return "bidir_ring";
    case isa::Collective::TORUS_2D:
      return "torus2d";
    case isa::Collective::TORUS:
      return "torus";
    default:
      return "ring";
  }
}

bool collective_algorithm_named(const std::string& name, isa::Collective::Algorithm* algorithm) {
  for (auto a : {isa::Collective::RING, isa::Collective::BIDIR_RING, isa::Collective::TORUS_2D,
                 isa::Collective::TORUS}) {
    if (name == collective_algorithm_name(a)) {
      *algorithm = a;
      return true;
    }
  }
  return false;
}

const char* vector_op_name(Vector::Op op) {
  switch (op) {
    case Vector::ADD:
      return "vpu.add";
    case Vector::SUB:
      return "vpu.sub";
    case Vector::MUL:
      return "vpu.mul";
    case Vector::DIV:
      return "vpu.div";
    case Vector::MAX:
      return "vpu.max";
    case Vector::MIN:
      return "vpu.min";
    case Vector::CMP_GT:
      return "vpu.cmp_gt";
    case Vector::CMP_GE:
      return "vpu.cmp_ge";
    case Vector::CMP_EQ:
      return "vpu.cmp_eq";
    case Vector::COPY:
      return "vpu.copy";
    case Vector::NEG:
      return "vpu.neg";
    case Vector::ABS:
      return "vpu.abs";
    case Vector::RELU:
      return "vpu.relu";
    case Vector::EXP:
      return "vpu.exp";
    case Vector::LOG:
      return "vpu.log";
    case Vector::TANH:
      return "vpu.tanh";
    case Vector::RSQRT:
      return "vpu.rsqrt";
    case Vector::SQUARE:
      return "vpu.square";
    case Vector::ROUND_BF16:
      return "vpu.round_bf16";
    case Vector::ERF:
      return "vpu.erf";
    case Vector::SELECT:
      return "vpu.select";
    case Vector::CAST:
      return "vpu.cast";
    case Vector::REDUCE_SUM:
      return "vpu.reduce_sum";
    case Vector::REDUCE_MAX:
      return "vpu.reduce_max";
    case Vector::TRANSPOSE:
      return "vpu.transpose";
    case Vector::BROADCAST:
      return "vpu.broadcast";
    case Vector::FILL:
      return "vpu.fill";
    case Vector::RNG_UNIFORM:
      return "vpu.rng_uniform";
    case Vector::CHAIN:
      return "vpu.chain";
    default:
      return "vpu.(unknown op)";
  }
}

VectorOpClass classify(Vector::Op op) {
  switch (op) {
    case Vector::ADD:
    case Vector::SUB:
    case Vector::MUL:
    case Vector::DIV:
    case Vector::MAX:
    case Vector::MIN:
    case Vector::CMP_GT:
    case Vector::CMP_GE:
    case Vector::CMP_EQ:
      return VectorOpClass::kBinary;
    case Vector::COPY:
    case Vector::NEG:
    case Vector::ABS:
    case Vector::RELU:
    case Vector::EXP:
    case Vector::LOG:
    case Vector::TANH:
    case Vector::RSQRT:
    case Vector::SQUARE:
    case Vector::ROUND_BF16:
    case Vector::ERF:
      return VectorOpClass::kUnary;
    case Vector::SELECT:
      return VectorOpClass::kSelect;
    case Vector::CAST:
      return VectorOpClass::kCast;
    case Vector::REDUCE_SUM:
    case Vector::REDUCE_MAX:
      return VectorOpClass::kReduce;
    case Vector::TRANSPOSE:
      return VectorOpClass::kTranspose;
    case Vector::BROADCAST:
      return VectorOpClass::kBroadcast;
    case Vector::FILL:
    case Vector::RNG_UNIFORM:
      return VectorOpClass::kFill;
    case Vector::CHAIN:
      return VectorOpClass::kChain;
    default:
      return VectorOpClass::kUnknown;
  }
}

bool is_transcendental(Vector::Op op) {
  return op == Vector::EXP || op == Vector::LOG || op == Vector::TANH || op == Vector::RSQRT ||
         op == Vector::ERF;
}

bool is_arithmetic(Vector::Op op) {
  switch (classify(op)) {
    case VectorOpClass::kBinary:
    case VectorOpClass::kSelect:
    case VectorOpClass::kReduce:
      return true;
    case VectorOpClass::kUnary:
      return op != Vector::COPY;
    default:
      return false;
  }
}

}  // namespace tpusim::sim
