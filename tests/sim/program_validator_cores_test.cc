// Well-formed programs pass the validator, and the rules across cores (each core once, a
// scatter that splits, collectives on cores of their own, shadow cores and shared instruction
// streams) refuse what breaks them, naming core, instruction and reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/isa/builder.h"
#include "sim/isa/validator.h"

namespace tpusim::sim {
namespace program_validator_cores_test {

using ::testing::HasSubstr;
using ::testing::Not;

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

const isa::Block kW = block(0x100000, 128, 128, isa::BF16);
const isa::Block kLhs = block(0, 64, 128, isa::BF16);
const isa::Block kOut = block(0x200000, 64, 128, isa::F32);
const isa::Block kV = block(0x300000, 8, 128, isa::F32);

TEST(ProgramValidator, AcceptsAWellFormedProgram) {
  isa::Program p;
  CoreBuilder c(&p, 0);
  const uint32_t f = c.new_flag();
  c.dma_to_vmem(block(0, 64, 128, isa::BF16), kLhs).signal(f);
  c.load_weights(0, 0, kW);
  c.matmul(0, 0, kLhs, kOut, false).wait(f, 1);
  c.loop(4, [&] {
    c.fill(kV, 1).signal(f);
    c.binary(isa::Vector::ADD, kV, kV, block(0x310000, 1, 128, isa::F32)).wait(f, 1);
  });
  c.halt();
  EXPECT_TRUE(validate_program(p, v3_8()).ok()) << validate_program(p, v3_8());
}

// A gather of 8 rows from a 100-row table and a scatter back: the table's rows are not the
// VMEM block's, and one s32 index per row (as a column or a row) is all the validator asks.
TEST(ProgramValidator, AcceptsIndexedDmas) {
  isa::Program p;
  CoreBuilder c(&p, 0);
  const uint32_t f = c.new_flag();
  c.dma_gather(block(0, 100, 128, isa::F32), block(0, 8, 128, isa::F32),
               block(0x10000, 8, 1, isa::S32))
      .signal(f);
  c.dma_scatter(block(0, 8, 128, isa::F32), block(1 << 20, 100, 128, isa::F32),
                block(0x10000, 1, 8, isa::S32), 1)
      .wait(f, 1);
  c.halt();
  EXPECT_TRUE(validate_program(p, v3_8()).ok()) << validate_program(p, v3_8());
}

TEST(ProgramValidator, CoresMustExistOnce) {
  isa::Program p;
  CoreBuilder(&p, 99).halt();
  CoreBuilder(&p, 1).halt();
  CoreBuilder(&p, 1).halt();
  const std::string msg(validate_program(p, v3_8()).message());
  EXPECT_THAT(msg, HasSubstr("core 99: the slice v3-8 has cores 0..7"));
  EXPECT_THAT(msg, HasSubstr("core 1: has two instruction streams"));
  EXPECT_THAT(msg, HasSubstr("(2 problems)"));
}

// Both members have streams, but 15 elements do not split over 2.
TEST(ProgramValidator, AScatterThatDoesNotSplitIsRejected) {
  isa::Program p;
  for (uint32_t core : {0u, 1u}) {
    CoreBuilder b(&p, core);
    auto* k = b.collective(isa::Collective::REDUCE_SCATTER, isa::Collective::RING, 0, 4096, 15)
                  .instruction()
                  .mutable_collective();
    k->add_group(0);
    k->add_group(1);
  }
  const absl::Status s = validate_program(p, v3_8());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("core 0 instruction 0 (ici.reduce_scatter): reduce_scatter of 15 elements "
                        "does not split evenly over 2 members"));
}

// A core's collective must count the core among its members.
TEST(ProgramValidator, ACollectiveWithoutItsOwnCoreIsRejected) {
  isa::Program p;
  for (uint32_t core : {0u, 1u}) {
    CoreBuilder b(&p, core);
    b.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16)
        .instruction()
        .mutable_collective()
        ->add_group(1);
  }
  EXPECT_THAT(std::string(validate_program(p, v3_8()).message()),
              HasSubstr("core 0 instruction 0 (ici.all_reduce): core 0 is not in its own "
                        "collective's group"));
}

// Replica folding: a shadow core runs its collectives alone, in order, and stands for a core of
// the program that is simulated.
TEST(ProgramValidator, ShadowCoresRunOnlyCollectivesAndStandForASimulatedCore) {
  isa::Program p;
  CoreBuilder(&p, 0).halt();
  CoreBuilder shadow(&p, 1);
  shadow.dma_to_vmem(block(0, 8, 128, isa::F32), kV);
  const uint32_t f = shadow.new_flag();
  auto* k = shadow.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16)
                .signal(f)
                .instruction()
                .mutable_collective();
  k->add_group(1);
  shadow.halt();
  CoreBuilder(&p, 2).halt();
  CoreBuilder(&p, 3).halt();
  for (int i : {1, 2, 3}) p.mutable_cores(i)->set_shadow(true);
  p.mutable_cores(1)->set_stands_for(0);
  p.mutable_cores(2)->set_stands_for(1);
  p.mutable_cores(3)->set_stands_for(7);
  const std::string msg(validate_program(p, v3_8()).message());
  EXPECT_THAT(msg,
              HasSubstr("core 1 instruction 0 (dma.hbm_to_vmem): is a dma.hbm_to_vmem in a shadow "
                        "core's stream, which runs only loops, collectives and halts"));
  EXPECT_THAT(msg, HasSubstr("core 1 instruction 1 (ici.all_reduce): waits or signals in a "
                             "shadow core's stream"));
  EXPECT_THAT(msg, HasSubstr("core 2: a shadow standing for core 1, which is a shadow too"));
  EXPECT_THAT(msg, HasSubstr("core 3: a shadow standing for core 7, which the program does not "
                             "run; it must stand for a simulated core"));
  EXPECT_THAT(msg, HasSubstr("(4 problems)"));
}

// A core may run another core's instructions (replicas at the same position of their chips run
// the same step): that core must hold its own, not be a shadow, and the borrower holds none. Its
// instructions are checked as the borrower's too, naming the borrower.
TEST(ProgramValidator, CoresRunningAnothersInstructionsNameAHolder) {
  isa::Program p;
  {
    CoreBuilder holder(&p, 0);
    holder.dma_to_vmem(block(0, 8, 128, isa::F32), kV);
    holder.halt();
  }
  for (uint32_t core : {2u, 3u, 4u, 5u, 6u}) p.add_cores()->set_core(core);
  p.mutable_cores(1)->set_instructions_from(0);  // core 2: fine
  p.mutable_cores(2)->set_instructions_from(2);  // core 3 borrows from core 2, a borrower
  p.mutable_cores(3)->set_instructions_from(7);  // core 4: no core 7
  p.mutable_cores(4)->set_instructions_from(0);  // core 5: holds one of its own too
  *p.mutable_cores(4)->add_instructions() = p.cores(0).instructions(1);
  p.mutable_cores(5)->set_instructions_from(0);  // core 6: a shadow
  p.mutable_cores(5)->set_shadow(true);
  p.mutable_cores(5)->set_stands_for(0);
  const std::string msg(validate_program(p, v3_8()).message());
  EXPECT_THAT(msg, Not(HasSubstr("core 2:")));
  EXPECT_THAT(msg, Not(HasSubstr("core 2 instruction")));
  EXPECT_THAT(msg, HasSubstr("core 3: runs the instructions of core 2, which runs another's "
                             "itself; name the core that holds them"));
  EXPECT_THAT(msg,
              HasSubstr("core 4: runs the instructions of core 7, which the program does not run"));
  EXPECT_THAT(msg, HasSubstr("core 5: runs the instructions of core 0 but holds 1 of its own"));
  EXPECT_THAT(msg, HasSubstr("core 6: runs the instructions of core 0: a shadow neither lends "
                             "nor borrows a program"));
  EXPECT_THAT(msg, HasSubstr("(4 problems)"));
  // A bad instruction in the holder is reported once, for the holder; a collective whose group
  // leaves out a borrower is reported for that borrower, since only its group depends on the
  // core that runs it.
  p.mutable_cores(0)->mutable_instructions(0)->mutable_dma()->mutable_dst()->set_rows(0);
  isa::Program q;
  *q.add_cores() = p.cores(0);
  *q.add_cores() = p.cores(1);
  const std::string bad(validate_program(q, v3_8()).message());
  EXPECT_THAT(bad, HasSubstr("core 0 instruction 0"));
  EXPECT_THAT(bad, Not(HasSubstr("core 2 instruction 0")));
  isa::Program r;
  {
    CoreBuilder holder(&r, 0);
    holder.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 4096, 16)
        .instruction()
        .mutable_collective()
        ->add_group(1);
    holder.halt();
  }
  r.mutable_cores(0)->mutable_instructions(0)->mutable_collective()->add_group(0);
  r.add_cores()->set_core(1);
  r.mutable_cores(1)->set_instructions_from(0);
  r.add_cores()->set_core(2);
  r.mutable_cores(2)->set_instructions_from(0);
  const std::string group(validate_program(r, v3_8()).message());
  EXPECT_THAT(group, Not(HasSubstr("core 0 instruction")));
  EXPECT_THAT(group, Not(HasSubstr("core 1 instruction")));
  EXPECT_THAT(group, HasSubstr("core 2 instruction 0 (ici.all_reduce): core 2 is not in its own "
                               "collective's group"));
}

}  // namespace program_validator_cores_test
}  // namespace tpusim::sim
