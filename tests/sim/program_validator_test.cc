// Every class of bad program is rejected before it runs, naming core, instruction and reason.
#include <cstring>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/isa/builder.h"
#include "sim/isa/validator.h"

namespace tpusim::sim {
namespace program_validator_test {

using ::testing::HasSubstr;
using ::testing::Not;

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

constexpr uint64_t kVmem = 16ull << 20;

struct BadProgram {
  const char* name;
  std::function<void(CoreBuilder&)> build;
  const char* expect;
};

std::ostream& operator<<(std::ostream& os, const BadProgram& b) { return os << b.name; }

class RejectedProgram : public ::testing::TestWithParam<BadProgram> {};

TEST_P(RejectedProgram, NamesCoreInstructionAndReason) {
  isa::Program p;
  p.set_name("bad");
  CoreBuilder core(&p, 3);
  GetParam().build(core);
  const absl::Status s = validate_program(p, v3_8());
  ASSERT_FALSE(s.ok()) << GetParam().name;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(GetParam().expect));
}

const isa::Block kW = block(0x100000, 128, 128, isa::BF16);
const isa::Block kLhs = block(0, 64, 128, isa::BF16);
const isa::Block kOut = block(0x200000, 64, 128, isa::F32);
const isa::Block kV = block(0x300000, 8, 128, isa::F32);

const BadProgram kBad[] = {
    {"UnsetOp", [](CoreBuilder& c) { c.halt().instruction().clear_op(); },
     "core 3 instruction 0 ((no operation)): has no operation"},
    {"OriginPastTheTable",
     [](CoreBuilder& c) {
       c.set_origin("dense/matmul", "matmul");
       c.fill(kV, 0).instruction().set_origin(2);
     },
     "instruction 0 (vpu.fill): names origin 2 but the core's program lists 1 origin(s)"},
    {"DmaWithoutDirection",
     [](CoreBuilder& c) {
       c.dma_to_vmem(kV, kV).instruction().mutable_dma()->set_direction(
           isa::Dma::DIRECTION_UNSPECIFIED);
     },
     "has no direction"},
    {"DmaShapesDiffer",
     [](CoreBuilder& c) { c.dma_to_vmem(block(0, 8, 128, isa::F32), block(0, 8, 64, isa::F32)); },
     "core 3 instruction 0 (dma.hbm_to_vmem): src 8x128 f32 and dst 8x64 f32 differ"},
    {"PackedBf16OfBf16Blocks",
     [](CoreBuilder& c) {
       c.dma_to_vmem(block(0, 8, 128, isa::BF16), block(0, 8, 128, isa::BF16))
           .instruction()
           .mutable_dma()
           ->set_packed_bf16(true);
     },
     "core 3 instruction 0 (dma.hbm_to_vmem): packed_bf16 moves bf16 values held as f32 words: "
     "both blocks must be f32"},
    // Indexed DMAs: the HBM block is the table, so rows may differ, but not the row width.
    {"IndexedDmaRowWidth",
     [](CoreBuilder& c) {
       c.dma_gather(block(0, 100, 128, isa::F32), block(0, 8, 64, isa::F32),
                    block(0x1000, 8, 1, isa::S32));
     },
     "src 100x128 f32 and dst 8x64 f32 differ in their rows' width or dtype (an indexed DMA moves "
     "whole table rows)"},
    {"IndexedDmaFloatIndices",
     [](CoreBuilder& c) {
       c.dma_gather(block(0, 100, 128, isa::F32), block(0, 8, 128, isa::F32),
                    block(0x10000, 8, 1, isa::F32));
     },
     "core 3 instruction 0 (dma.hbm_to_vmem): index is f32; row indices are s32"},
    {"IndexedDmaIndexCount",
     [](CoreBuilder& c) {
       c.dma_scatter(block(0, 8, 128, isa::F32), block(0, 100, 128, isa::F32),
                     block(0x10000, 1, 7, isa::S32));
     },
     "core 3 instruction 0 (dma.vmem_to_hbm): index holds 7 indices but the VMEM block has 8 rows "
     "(one index per row)"},
    {"IndexedDmaIndexOutsideVmem",
     [](CoreBuilder& c) {
       c.dma_gather(block(0, 100, 128, isa::F32), block(0, 8, 128, isa::F32),
                    block(kVmem, 8, 1, isa::S32));
     },
     "index [16777216, 16777248) overflows VMEM of 16777216 bytes"},
    {"DmaEngineMissing", [](CoreBuilder& c) { c.dma_to_vmem(kV, kV, 9); },
     "uses DMA engine 9; the core has 4"},
    {"VmemOverflow",
     [](CoreBuilder& c) { c.dma_to_vmem(kV, block(kVmem - 1024, 8, 128, isa::F32)); },
     "dst [16776192, 16780288) overflows VMEM of 16777216 bytes"},
    // The simulator's HBM of a v3 chip spans twice its 32 GiB (values held 4 bytes;
    // sim/core_map.h).
    {"HbmOverflow", [](CoreBuilder& c) { c.dma_to_hbm(kV, block(64ull << 30, 8, 128, isa::F32)); },
     "overflows HBM of 68719476736 bytes"},
    {"EmptyBlock", [](CoreBuilder& c) { c.fill(block(0, 0, 128, isa::F32), 1); },
     "dst is empty (0 x 128)"},
    {"BlockWithoutDtype",
     [](CoreBuilder& c) { c.fill(block(0, 8, 128, isa::DTYPE_UNSPECIFIED), 1); },
     "dst has no dtype"},
    {"MisalignedBlock", [](CoreBuilder& c) { c.fill(block(2, 8, 128, isa::F32), 1); },
     "dst at address 2 with row stride 512 is not aligned to its 4-byte elements"},
    {"OverlappingRows", [](CoreBuilder& c) { c.fill(block(0, 8, 128, isa::F32, 256), 1); },
     "dst row stride 256 is shorter than a row of 512 bytes"},
    {"NoSuchMxu", [](CoreBuilder& c) { c.load_weights(5, 0, kW); },
     "core 3 instruction 0 (mxu.load_weights): uses MXU 5; the core has 2"},
    {"NoSuchSlot", [](CoreBuilder& c) { c.load_weights(0, 2, kW); }, "uses weight slot 2"},
    {"WeightsTooBig", [](CoreBuilder& c) { c.load_weights(0, 0, block(0, 200, 128, isa::BF16)); },
     "weights 200x128 exceed the 128x128 array"},
    {"MatmulWithoutWeights", [](CoreBuilder& c) { c.matmul(0, 1, kLhs, kOut, false); },
     "core 3 instruction 0 (mxu.matmul): MXU 0 slot 1 has no weights"},
    {"MatmulInnerDimensionsDiffer",
     [](CoreBuilder& c) {
       c.load_weights(0, 0, kW);
       c.matmul(0, 0, block(0, 64, 100, isa::BF16), kOut, false);
     },
     "instruction 1 (mxu.matmul): lhs has 100 columns but the weights in slot 0 have 128 rows"},
    {"MatmulOutNotF32",
     [](CoreBuilder& c) {
       c.load_weights(0, 0, kW);
       c.matmul(0, 0, kLhs, block(0x200000, 64, 128, isa::BF16), false);
     },
     "out must be f32"},
    {"MatmulOutShape",
     [](CoreBuilder& c) {
       c.load_weights(0, 0, kW);
       c.matmul(0, 0, kLhs, block(0x200000, 32, 128, isa::F32), false);
     },
     "out is 32x128; lhs 64 rows x weights 128 columns make 64x128"},
    {"MatmulGroupsOverflowVmem",
     [](CoreBuilder& c) {
       c.load_weights(0, 0, kW);
       c.grouped_matmul(0, 0, kLhs, kOut, 1000, 0, 0x10000, false);
     },
     "instruction 1 (mxu.matmul): last group's out [67567616, 67600384) overflows VMEM of "
     "16777216 bytes"},
    {"MatmulGroupStridesWrap",
     [](CoreBuilder& c) {
       c.load_weights(0, 0, kW);
       c.grouped_matmul(0, 0, kLhs, kOut, 3, uint64_t{1} << 63, 0, false);
     },
     "3 groups of strides 9223372036854775808 and 0 bytes run past the end of addresses"},
    {"UnknownVectorOp",
     [](CoreBuilder& c) {
       c.fill(kV, 0).instruction().mutable_vector()->set_op(static_cast<isa::Vector::Op>(999));
     },
     "unknown vector op 999"},
    {"BinaryOperandShape",
     [](CoreBuilder& c) { c.binary(isa::Vector::ADD, kV, kV, block(0, 2, 128, isa::F32)); },
     "b is 2x128; it must be 8x128, 1x128, 8x1 or 1x1"},
    {"ReduceShape",
     [](CoreBuilder& c) { c.reduce(isa::Vector::REDUCE_SUM, block(0, 8, 1, isa::F32), kV, 0); },
     "reducing 8x128 along axis 0 gives 1x128, not 8x1"},
    {"TransposeShape", [](CoreBuilder& c) { c.transpose(kV, kV); },
     "transposing 8x128 gives 128x8, not 8x128"},
    {"VectorDstNotF32",
     [](CoreBuilder& c) { c.unary(isa::Vector::EXP, block(0, 8, 128, isa::BF16), kV); },
     "dst must be f32"},
    {"FillWithAnOperand",  // fuzz_program's find: an `a` of no columns reached a null memcpy
     [](CoreBuilder& c) {
       *c.fill(kV, 0).instruction().mutable_vector()->mutable_a() = block(4096, 8, 0, isa::F32);
     },
     "instruction 0 (vpu.fill): takes no operand a"},
    {"UnaryWithAnOperandB",
     [](CoreBuilder& c) {
       *c.unary(isa::Vector::EXP, kV, kV).instruction().mutable_vector()->mutable_b() =
           block(1u << 30, 8, 128, isa::F32);  // past VMEM: it would have been read
     },
     "instruction 0 (vpu.exp): takes no operand b"},
    {"SelectWithoutC",
     [](CoreBuilder& c) { c.select(kV, kV, kV, kV).instruction().mutable_vector()->clear_c(); },
     "select needs operands b and c"},
    {"LoopCountZero", [](CoreBuilder& c) { c.loop(0, [&] { c.fill(kV, 0); }); },
     "loop): count must be >= 1"},
    {"LoopPastTheEnd",
     [](CoreBuilder& c) {
       c.loop(2, [&] { c.fill(kV, 0); }).instruction().mutable_loop()->set_body_length(5);
     },
     "body of 5 instructions runs past the end of the stream"},
    {"NestedLoopCrossesItsParent",
     [](CoreBuilder& c) {
       c.loop(2, [&] {
         c.loop(2, [&] { c.fill(kV, 0); }).instruction().mutable_loop()->set_body_length(3);
       });
       c.fill(kV, 1);
       c.fill(kV, 2);
     },
     "runs past the enclosing loop's body"},
    {"FlagOutOfRange", [](CoreBuilder& c) { c.fill(kV, 0).signal(300); },
     "signals flag 300; flags are 0..255"},
    {"FlagNeverSignalled", [](CoreBuilder& c) { c.fill(kV, 0).wait(7, 1); },
     "core 3 instruction 0 (vpu.fill): waits for flag 7 to reach 1 but only 0 signal(s)"},
    {"WaitAcrossALoopBoundary",
     [](CoreBuilder& c) {
       c.fill(kV, 0).signal(1);
       c.loop(3, [&] { c.fill(kV, 1).wait(1, 1); });
     },
     "instruction 2 (vpu.fill): waits for flag 1 to reach 1 but only 0 signal(s)"},
    {"WaitForMoreThanIsSignalled",
     [](CoreBuilder& c) {
       c.fill(kV, 0).signal(4);
       c.fill(kV, 0).signal(4);
       c.fill(kV, 1).wait(4, 3);
     },
     "waits for flag 4 to reach 3 but only 2 signal(s)"},
    // Collectives: kinds, algorithms, groups, peers, sizes and buffers.
    {"CollectiveWithoutKind",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::KIND_UNSPECIFIED, isa::Collective::RING, 0, 4096, 16);
     },
     "core 3 instruction 0 (ici.(no kind)): has no kind"},
    {"TorusWithAGroup",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::ALL_REDUCE, isa::Collective::TORUS_2D, 0, 4096, 16)
           .instruction()
           .mutable_collective()
           ->add_group(3);
     },
     "torus2d runs over every core of the slice: leave the group empty"},
    {"EveryDimensionTorusWithAGroup",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::ALL_REDUCE, isa::Collective::TORUS, 0, 4096, 16)
           .instruction()
           .mutable_collective()
           ->add_group(3);
     },
     "torus runs over every core of the slice: leave the group empty"},
    {"BidirReduceScatter",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::REDUCE_SCATTER, isa::Collective::BIDIR_RING, 0, 4096, 16)
           .instruction()
           .mutable_collective()
           ->add_group(3);
     },
     "algorithm bidir_ring does not apply to reduce_scatter (ring only)"},
    {"GroupMemberWithoutAStream",
     [](CoreBuilder& c) {
       auto* k = c.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16)
                     .instruction()
                     .mutable_collective();
       k->add_group(3);
       k->add_group(5);
     },
     "group member core 5 has no instruction stream in this program: the collective could "
     "never start"},
    {"EveryCoreButOnlyOneStream",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16);
     },
     "group member core 0 has no instruction stream in this program"},
    {"NotInItsOwnGroup",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16)
           .instruction()
           .mutable_collective()
           ->add_group(9);
     },
     "group member 9 is not a core of v3-8 (0..7)"},
    {"PermuteToItself",
     [](CoreBuilder& c) {
       auto* k = c.collective(isa::Collective::PERMUTE, isa::Collective::ALGORITHM_UNSPECIFIED, 0,
                              4096, 16)
                     .instruction()
                     .mutable_collective();
       k->add_group(3);
       k->set_peer(3);
     },
     "peer 3 must be another member of the group"},
    {"GroupNamesACoreTwice",
     [](CoreBuilder& c) {
       auto* k = c.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16)
                     .instruction()
                     .mutable_collective();
       k->add_group(3);
       k->add_group(3);
     },
     "group names core 3 twice"},
    {"PartsOnAReduceScatter",
     [](CoreBuilder& c) {
       isa::CollectivePart part;
       part.set_src(0);
       part.set_dst(4096);
       part.set_elements(16);
       auto* k =
           c.combined_all_reduce(isa::Collective::RING, {part}).instruction().mutable_collective();
       k->set_kind(isa::Collective::REDUCE_SCATTER);
       k->add_group(3);
     },
     "reduce_scatter has parts: only an all_reduce combines buffers"},
    {"PartsThatDoNotAddUp",
     [](CoreBuilder& c) {
       isa::CollectivePart a, b;
       a.set_dst(4096);
       a.set_elements(16);
       b.set_src(8192);
       b.set_dst(68719476736ull - 32);
       b.set_elements(16);
       auto* k =
           c.combined_all_reduce(isa::Collective::RING, {a, b}).instruction().mutable_collective();
       k->add_group(3);
       k->set_elements(40);
     },
     "part 1 dst [68719476704, 68719476768) overflows HBM of 68719476736 bytes\n"
     "  core 3 instruction 0 (ici.all_reduce): elements 40 is not the sum of its parts' (32)"},
    {"PartsAndASrc",
     [](CoreBuilder& c) {
       isa::CollectivePart part;
       part.set_dst(4096);
       part.set_elements(16);
       auto* k =
           c.combined_all_reduce(isa::Collective::RING, {part}).instruction().mutable_collective();
       k->set_src(64);
       k->add_group(3);
     },
     "has parts and a src or dst: a combined all_reduce's buffers are its parts"},
    {"PartsThatOverlap",
     [](CoreBuilder& c) {
       isa::CollectivePart a, b;
       a.set_src(0);
       a.set_dst(0);  // in place: fine
       a.set_elements(16);
       b.set_src(4096);
       b.set_dst(32);  // inside part 0
       b.set_elements(16);
       c.combined_all_reduce(isa::Collective::RING, {a, b})
           .instruction()
           .mutable_collective()
           ->add_group(3);
     },
     "part 1 dst [32, 96) overlaps part 0 src [0, 64)"},
    {"CollectiveBeyondHbm",
     [](CoreBuilder& c) {
       c.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 68719476736ull, 16)
           .instruction()
           .mutable_collective()
           ->add_group(3);
     },
     "dst [68719476736, 68719476800) overflows HBM of 68719476736 bytes"},
    {"ChainOfNoSteps", [](CoreBuilder& c) { c.vector(VectorChain().instruction()); },
     "core 3 instruction 0 (vpu.chain): is a chain of no steps"},
    {"ChainTooLong",
     [](CoreBuilder& c) {
       VectorChain chain;
       for (int i = 0; i < 4097; ++i) chain.add(vector_ops::unary(isa::Vector::RELU, kV, kV));
       c.vector(chain.instruction());
     },
     "instruction 0 (vpu.chain): is a chain of 4097 steps; at most 4096"},
    {"ChainWithATranspose",
     [](CoreBuilder& c) {
       VectorChain chain;
       chain.add(vector_ops::unary(isa::Vector::RELU, kV, kV), true);
       chain.add(vector_ops::unary(isa::Vector::TRANSPOSE, block(0, 128, 8, isa::F32), kV));
       c.vector(chain.instruction());
     },
     "instruction 0 (vpu.chain): step 1 (vpu.transpose) may not be a step of a chain"},
    {"ChainStepOutsideVmem",
     [](CoreBuilder& c) {
       VectorChain chain;
       chain.add(vector_ops::binary(isa::Vector::ADD, kV, kV, block(kVmem, 8, 128, isa::F32)));
       c.vector(chain.instruction());
     },
     "instruction 0 (vpu.chain): step 0 (vpu.add) b"},
    {"ChainInRegister",
     [](CoreBuilder& c) {
       VectorChain chain;
       chain.add(vector_ops::unary(isa::Vector::RELU, kV, kV));
       c.vector(chain.instruction()).instruction().mutable_vector()->set_in_register(true);
     },
     "instruction 0 (vpu.chain): is a chain marked in_register (only its steps may be)"},
    {"InRegisterOutsideAChain",
     [](CoreBuilder& c) {
       c.unary(isa::Vector::RELU, kV, kV).instruction().mutable_vector()->set_in_register(true);
     },
     "instruction 0 (vpu.relu): has steps or in_register, which only a chain and its steps take"},
};

INSTANTIATE_TEST_SUITE_P(EveryClass, RejectedProgram, ::testing::ValuesIn(kBad),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace program_validator_test
}  // namespace tpusim::sim
