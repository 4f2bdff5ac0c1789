// A System recovers from a failed run in the same process (sim/process_restart.h): after a
// deadlock, a cycle-cap stop or a unit's error, a good program runs in exactly the cycles, and
// computes exactly the values, it does after a good run. One System per process.
#include <cstring>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace recovery_test {

using ::testing::HasSubstr;
using C = isa::Collective;

// VMEM of each core (f32 blocks).
const isa::Block kLhs = block(0x00000, 64, 128, isa::F32);
const isa::Block kWeights = block(0x10000, 128, 128, isa::F32);
const isa::Block kProduct = block(0x20000, 64, 128, isa::F32);
const isa::Block kFed = block(0x30000, 64, 128, isa::F32);
const isa::Block kSum = block(0x40000, 64, 128, isa::F32);
constexpr uint64_t kElements = 64 * 128;
constexpr uint64_t kBytes = kElements * sizeof(float);

// Cores 0 and 1 share chip 0's HBM, 2 and 3 chip 1's: each has its own region.
uint64_t region(uint32_t core) { return 0x1000000ull * core; }
isa::Block hbm(uint32_t core, uint64_t offset, int rows, int cols) {
  return block(region(core) + offset, rows, cols, isa::F32);
}
constexpr uint32_t kGoodCores[] = {0, 1, 2, 3};
constexpr uint64_t kLhsAt = 0, kWeightsAt = 0x10000, kSumAt = 0x100000, kReducedAt = 0x200000,
                   kEarlyAt = 0x300000, kBigAt = 0x400000;
// 2 MiB, read into VMEM first on every core: HBM channels and VMEM ports on the critical path.
const isa::Block kBig = block(0x100000, 512, 1024, isa::F32);

using testing::entry_of;

// `core`'s part of a ring all-reduce of kElements f32 from `src` to `dst` of its HBM region
// over `members`.
InstrRef all_reduce(CoreBuilder& c, uint32_t core, uint64_t src, uint64_t dst,
                    std::initializer_list<uint32_t> members) {
  InstrRef reduce =
      c.collective(C::ALL_REDUCE, C::RING, region(core) + src, region(core) + dst, kElements);
  for (uint32_t member : members) reduce.instruction().mutable_collective()->add_group(member);
  return reduce;
}

// Every unit kind on cores 0-3 (chips 0 and 1): an all-reduce of the four cores' inputs and a
// 2 MiB DMA first (links, HBM channels and VMEM ports on the critical path), DMAs in, an
// infeed, weights and a matmul, a vector add, a DMA out, an all-reduce of the four cores' sums,
// and an outfeed on core 1.
isa::Program good_program() {
  isa::Program p;
  p.set_name("good");
  for (uint32_t core : kGoodCores) {
    CoreBuilder c(&p, core);
    const uint32_t in = c.new_flag(), fed = c.new_flag(), product = c.new_flag();
    const uint32_t sum = c.new_flag(), stored = c.new_flag(), early = c.new_flag();
    all_reduce(c, core, kLhsAt, kEarlyAt, {0, 1, 2, 3}).signal(early);
    c.dma_to_vmem(hbm(core, kBigAt, 512, 1024), kBig, 2).signal(in);
    c.dma_to_vmem(hbm(core, kLhsAt, 64, 128), kLhs).signal(in);
    c.dma_to_vmem(hbm(core, kWeightsAt, 128, 128), kWeights, 1).signal(in);
    c.infeed(kFed).signal(fed);
    c.load_weights(0, 0, kWeights).wait(in, 3);
    c.matmul(0, 0, kLhs, kProduct, false).wait(early, 1).signal(product);
    c.binary(isa::Vector::ADD, kSum, kProduct, kFed).wait(product, 1).wait(fed, 1).signal(sum);
    c.dma_to_hbm(kSum, hbm(core, kSumAt, 64, 128)).wait(sum, 1).signal(stored);
    all_reduce(c, core, kSumAt, kReducedAt, {0, 1, 2, 3}).wait(stored, 1);
    if (core == 1) c.outfeed(kSum).wait(sum, 1);
    c.halt();
  }
  return p;
}

// Blocked three ways at once: core 0's vector unit waits for a flag only a later instruction
// of its own queue signals, core 1 waits in an all-reduce core 0 never reaches (after an
// outfeed the host takes), core 2 waits for an infeed that never comes. Core 0 has two infeed
// entries waiting that this program never takes.
isa::Program deadlocking_program() {
  isa::Program p;
  p.set_name("deadlocks");
  CoreBuilder c0(&p, 0);
  c0.fill(kSum, 1).wait(5, 1);
  c0.fill(kSum, 2).signal(5);
  c0.halt();
  CoreBuilder c1(&p, 1);
  c1.outfeed(kSum);
  all_reduce(c1, 1, kSumAt, kReducedAt, {0, 1});
  c1.halt();
  CoreBuilder c2(&p, 2);
  c2.infeed(kFed);
  c2.halt();
  return p;
}

// Far past the cap, with every kind of work in flight when it stops: core 0 streams 4 MiB
// DMAs (chip 0's HBM channels reserved past the stop), core 1 fills a block again and again (an
// event every few cycles up to the cap), cores 2 and 3 load weights, multiply and all-reduce.
isa::Program endless_program() {
  isa::Program p;
  p.set_name("endless");
  CoreBuilder streamer(&p, 0);
  streamer.loop(1'000'000, [&] {
    streamer.dma_to_vmem(block(0x10000000, 1024, 1024, isa::F32),
                         block(0x100000, 1024, 1024, isa::F32));
  });
  streamer.halt();
  CoreBuilder filler(&p, 1);
  filler.loop(1'000'000, [&] { filler.fill(kSum, 3.0f); });
  filler.halt();
  for (uint32_t core : {2u, 3u}) {
    CoreBuilder c(&p, core);
    c.loop(1'000'000, [&] {
      const uint32_t in = c.new_flag(), product = c.new_flag(), stored = c.new_flag();
      c.dma_to_vmem(hbm(core, kWeightsAt, 128, 128), kWeights).signal(in);
      c.load_weights(0, 0, kWeights).wait(in, 1);
      c.matmul(0, 0, kLhs, kProduct, false).signal(product);
      c.dma_to_hbm(kProduct, hbm(core, kSumAt, 64, 128)).wait(product, 1).signal(stored);
      all_reduce(c, core, kSumAt, kReducedAt, {2, 3}).wait(stored, 1);
    });
    c.halt();
  }
  return p;
}

// Core 0 dequeues an entry of the wrong size: its infeed unit stops the run.
isa::Program misfed_program() {
  isa::Program p;
  p.set_name("misfed");
  CoreBuilder c(&p, 0);
  c.infeed(kFed);
  c.halt();
  return p;
}

struct Outcome {
  RunResult run;
  std::vector<uint8_t> reduced;  // each good core's all-reduce result
  std::vector<FeedEntry> outfeed;
};

class Recovery : public ::testing::Test {
 protected:
  static constexpr uint64_t kCap = 200'000;

  void SetUp() override {
    SystemOptions options;
    options.max_run_cycles = kCap;
    system_ = testing::make_system("v3-8", options);
    ASSERT_NE(system_, nullptr);
    for (uint32_t core : kGoodCores) {
      const MatrixF lhs = testing::random_matrix(64, 128, 10 + core);
      const MatrixF weights = testing::random_matrix(128, 128, 20 + core);
      const ChipId chip{core / 2};
      ASSERT_TRUE(system_->write_hbm(chip, region(core) + kLhsAt, lhs.data(), kBytes).ok());
      ASSERT_TRUE(system_
                      ->write_hbm(chip, region(core) + kWeightsAt, weights.data(),
                                  sizeof(float) * weights.size())
                      .ok());
    }
  }

  Outcome run_good() {
    Outcome out;
    for (uint32_t core : kGoodCores) {
      EXPECT_TRUE(system_
                      ->send_infeed(CoreId{core}, entry_of(testing::random_matrix(64, 128, 30)),
                                    system_->now_cycle())
                      .ok());
    }
    auto run = system_->run(good_program_);
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) return out;
    out.run = *run;
    out.reduced.resize(std::size(kGoodCores) * kBytes);
    for (uint32_t core : kGoodCores) {
      EXPECT_TRUE(system_
                      ->read_hbm(ChipId{core / 2}, region(core) + kReducedAt,
                                 out.reduced.data() + core * kBytes, kBytes)
                      .ok());
    }
    out.outfeed = system_->take_outfeed(CoreId{1});
    return out;
  }

  // Runs one of the failing programs; returns its status.
  absl::Status run_failing(int kind) {
    if (kind == 0) {
      for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(system_
                        ->send_infeed(CoreId{0}, entry_of(testing::random_matrix(64, 128, 99)),
                                      system_->now_cycle())
                        .ok());
      }
      return system_->run(deadlocking_).status();
    }
    if (kind == 1) return system_->run(endless_).status();
    FeedEntry short_entry;
    short_entry.bytes = 4096;
    short_entry.data.assign(4096, 0);
    EXPECT_TRUE(system_->send_infeed(CoreId{0}, std::move(short_entry), system_->now_cycle()).ok());
    return system_->run(misfed_).status();
  }

  std::unique_ptr<System> system_;
  const isa::Program good_program_ = good_program();
  const isa::Program deadlocking_ = deadlocking_program();
  const isa::Program endless_ = endless_program();
  const isa::Program misfed_ = misfed_program();
};

void expect_same(const Outcome& got, const Outcome& first, int round) {
  EXPECT_EQ(got.run.cycles(), first.run.cycles()) << "round " << round;
  ASSERT_EQ(got.run.cores.size(), first.run.cores.size()) << "round " << round;
  for (size_t i = 0; i < got.run.cores.size(); ++i)
    EXPECT_EQ(got.run.cores[i].cycles, first.run.cores[i].cycles) << "round " << round;
  EXPECT_TRUE(got.reduced == first.reduced) << "round " << round;
  ASSERT_EQ(got.outfeed.size(), 1u) << "round " << round;
  EXPECT_TRUE(got.outfeed[0].data == first.outfeed[0].data) << "round " << round;
}

// 100 failed runs (a deadlock, a cap stop and a unit's error in turn), each followed by the
// good program: every time its cycles per core, its all-reduce's bytes and its outfeed are
// those of its run after a good run, and the System is still usable.
TEST_F(Recovery, AGoodProgramRunsAsItDidFirstAfterAHundredFailedRuns) {
  // The System's first run is not the reference: it and later runs of the same program differ
  // by 8 cycles on each core (10,660 and 10,668 swap between the two cores of each chip),
  // because the four cores' all-reduce chunk writes that fall in the same cycle reach HBM in
  // the order SystemC runs the cores' processes, and the first run after elaboration orders
  // them otherwise (docs/reliability.md, "What is not done yet"). Every later run agrees.
  run_good();
  const Outcome first = run_good();
  ASSERT_GT(first.run.cycles(), 0u);
  ASSERT_LT(first.run.cycles(), kCap);
  ASSERT_EQ(first.outfeed.size(), 1u);
  const absl::StatusCode expected[] = {absl::StatusCode::kDeadlineExceeded,
                                       absl::StatusCode::kOutOfRange,
                                       absl::StatusCode::kFailedPrecondition};
  for (int round = 0; round < 100; ++round) {
    const absl::Status failed = run_failing(round % 3);
    ASSERT_EQ(failed.code(), expected[round % 3]) << "round " << round << ": " << failed;
    ASSERT_TRUE(system_->usable()) << "round " << round;
    expect_same(run_good(), first, round);
    if (HasFailure()) return;
  }
  EXPECT_EQ(system_->recoveries(), 100u);
}

// Each failure still says what blocked; the recovery comes after the diagnosis.
TEST_F(Recovery, EachFailureIsDiagnosedBeforeTheSystemRecovers) {
  const absl::Status deadlock = run_failing(0);
  EXPECT_THAT(std::string(deadlock.message()),
              HasSubstr("core 0: slice.chip0.core0.vpu at instruction 0 (vpu.fill): waits for "
                        "flag 5 >= 1 (now 0)"));
  EXPECT_THAT(std::string(deadlock.message()),
              HasSubstr("core 2: slice.chip1.core0.infeed at instruction 0 (infeed.dequeue)"));
  const absl::Status capped = run_failing(1);
  EXPECT_THAT(std::string(capped.message()),
              HasSubstr("program 'endless' would run past the run's limit of 200000 cycles"));
  const absl::Status misfed = run_failing(2);
  EXPECT_THAT(std::string(misfed.message()),
              HasSubstr("the infeed entry holds 4096 bytes but the destination block takes 32768"));
  EXPECT_EQ(system_->recoveries(), 3u);
  // The same program deadlocks again the same way: nothing of the first attempt is left.
  const absl::Status again = run_failing(0);
  EXPECT_EQ(again.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(again.message()), HasSubstr("waits for flag 5 >= 1 (now 0)"));
}

}  // namespace recovery_test
}  // namespace tpusim::sim
