// A program that can never finish is diagnosed, not hung: the run returns a message naming each
// blocked unit and what it waits for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace deadlock_test {

using ::testing::HasSubstr;
using testing::make_system;

const isa::Block kV = block(0x1000, 8, 128, isa::F32);

// The vector unit runs in order: instruction 0 waits for a flag only instruction 1, behind it
// in the same queue, would signal. The static check sees a signal and lets it through.
TEST(Deadlock, WaitOnALaterInstructionOfTheSameUnit) {
  auto system = make_system();
  isa::Program p;
  p.set_name("cycle");
  CoreBuilder c(&p, 2);
  c.fill(kV, 1).wait(5, 1);
  c.fill(kV, 2).signal(5);
  c.halt();
  auto run = system->run(p);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string msg(run.status().message());
  EXPECT_THAT(msg, HasSubstr("program 'cycle' deadlocked"));
  EXPECT_THAT(msg, HasSubstr("core 2: slice.chip1.core0.vpu at instruction 0 (vpu.fill): waits for "
                             "flag 5 >= 1 (now 0)"));
  EXPECT_THAT(msg, HasSubstr("sequencer: waits for 2 issued instruction(s) to complete"));
  // The System recovered (tests/sim/recovery_test.cc): the program runs again, from nothing
  // the first attempt left, and deadlocks the same way.
  EXPECT_TRUE(system->usable());
  auto again = system->run(p);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("waits for flag 5 >= 1 (now 0)"));
}

TEST(Deadlock, InfeedThatNeverArrives) {
  auto system = make_system();
  isa::Program p;
  p.set_name("starved");
  CoreBuilder c(&p, 0);
  c.infeed(kV);
  c.halt();
  auto run = system->run(p);
  ASSERT_FALSE(run.ok());
  const std::string msg(run.status().message());
  EXPECT_THAT(
      msg,
      HasSubstr("core 0: slice.chip0.core0.infeed at instruction 0 (infeed.dequeue): waits for an "
                "infeed entry"));
  EXPECT_THAT(msg, HasSubstr("the host has 0 infeed batch(es) pending for it"));
}

TEST(Deadlock, OutfeedThatNobodyDrainsIsNotADeadlock) {
  // The host link drains the outfeed queue by itself; five enqueues into a queue of four finish.
  auto system = make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  isa::Program p;
  CoreBuilder c(&p, 0);
  for (int i = 0; i < 5; ++i) c.outfeed(kV);
  c.halt();
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(system->take_outfeed(CoreId{0}).size(), 5u);
}

// An all-reduce one member never reaches (it starves on its infeed first): the member that did
// issue it waits in the collective unit, and the diagnosis names both cores and what each waits
// for, instead of the run hanging.
TEST(Deadlock, ACollectiveAMemberNeverReaches) {
  auto system = make_system();
  isa::Program p;
  p.set_name("half_reduce");
  CoreBuilder c0(&p, 0);
  c0.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 65536, 1024)
      .instruction()
      .mutable_collective()
      ->add_group(0);
  c0.builder_instruction(0)->mutable_collective()->add_group(1);
  c0.halt();
  CoreBuilder c1(&p, 1);
  c1.infeed(kV).signal(0);
  c1.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0, 65536, 1024).wait(0, 1);
  c1.builder_instruction(1)->mutable_collective()->add_group(0);
  c1.builder_instruction(1)->mutable_collective()->add_group(1);
  c1.halt();
  auto run = system->run(p);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string msg(run.status().message());
  EXPECT_THAT(msg, HasSubstr("program 'half_reduce' deadlocked"));
  EXPECT_THAT(msg, HasSubstr("core 1: slice.chip0.core1.infeed at instruction 0 (infeed.dequeue): "
                             "waits for an infeed entry"));
  EXPECT_THAT(msg, HasSubstr("core 0: slice.chip0.core0.ici at instruction 0 (ici.all_reduce): "
                             "waits for core(s) 1 to issue collective #0 (all_reduce over 2 "
                             "cores)"));
}

}  // namespace deadlock_test
}  // namespace tpusim::sim
