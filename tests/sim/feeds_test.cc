// Infeed and outfeed through the host link, and the device loop.
#include <cstring>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace feeds_test {

using testing::make_system;

const isa::Block kIn = block(0x0, 8, 128, isa::F32);
const isa::Block kOut = block(0x10000, 8, 128, isa::F32);

using testing::entry_of;

MatrixF matrix_of(const FeedEntry& e, int rows, int cols) {
  MatrixF m(rows, cols);
  std::memcpy(m.data(), e.data.data(), e.bytes);
  return m;
}

// The device loop: each iteration dequeues a batch, doubles it, and sends it back.
isa::Program doubling_loop(uint32_t iterations) {
  isa::Program p;
  p.set_name("double");
  CoreBuilder c(&p, 1);
  const uint32_t in = c.new_flag();
  const uint32_t done = c.new_flag();
  c.loop(iterations, [&] {
    c.infeed(kIn).signal(in);
    c.binary_scalar(isa::Vector::MUL, kOut, kIn, 2.0f).wait(in, 1).signal(done);
    c.outfeed(kOut).wait(done, 1);
  });
  c.halt();
  return p;
}

TEST(Feeds, DeviceLoopProcessesEveryBatchInOrder) {
  auto system = make_system();
  std::vector<MatrixF> batches;
  for (uint32_t i = 0; i < 6; ++i) {
    batches.push_back(testing::random_matrix(8, 128, 10 + i));
    ASSERT_TRUE(system->send_infeed(CoreId{1}, entry_of(batches.back()), 0).ok());
  }
  auto run = system->run(doubling_loop(6));
  ASSERT_TRUE(run.ok()) << run.status();
  const auto out = system->take_outfeed(CoreId{1});
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(matrix_of(out[i], 8, 128), batches[i] * 2.0f) << "batch " << i;
  }
  EXPECT_EQ(system->stats().value("chip0.core1.sequencer.loop_iterations"), 6);
}

// 4 KiB at 16 GB/s = 256 ns = 240.64 -> 241 cycles, plus 1 us link latency = 940 cycles: 1181
// cycles per transfer. A batch ready only at cycle 20000 leaves the device waiting that long.
TEST(Feeds, LateHostBatchIsCountedAsInfeedWait) {
  auto system = make_system();
  const MatrixF batch = testing::random_matrix(8, 128, 3);
  ASSERT_TRUE(system->send_infeed(CoreId{1}, entry_of(batch), 20000).ok());
  auto run = system->run(doubling_loop(1));
  ASSERT_TRUE(run.ok()) << run.status();
  const uint64_t waited = system->report(*run).cores.at(0).infeed_wait_cycles;
  // The dequeue issues at cycle 0 (the loop itself takes no issue slot) and the batch lands at
  // 20000 + 1181 = 21181.
  EXPECT_EQ(waited, 21181u);
  EXPECT_GT(run->cycles(), 21181u);
}

// The device is faster than the host: with batches ready every 50,000 cycles it waits for each
// one; with every batch ready up front it waits only for the first transfer.
TEST(Feeds, WaitsOnlyWhereTheHostIsSlower) {
  auto system = make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  for (uint32_t i = 0; i < 4; ++i) {
    FeedEntry e;
    e.bytes = 4096;
    ASSERT_TRUE(system->send_infeed(CoreId{1}, std::move(e), 50000ull * i).ok());
  }
  auto slow = system->run(doubling_loop(4));
  ASSERT_TRUE(slow.ok()) << slow.status();
  const uint64_t slow_wait = system->report(*slow).cores.at(0).infeed_wait_cycles;
  EXPECT_GT(slow_wait, 3 * 45000u);

  const uint64_t now = system->now_cycle();
  for (uint32_t i = 0; i < 4; ++i) {
    FeedEntry e;
    e.bytes = 4096;
    ASSERT_TRUE(system->send_infeed(CoreId{1}, std::move(e), now).ok());
  }
  auto fast = system->run(doubling_loop(4));
  ASSERT_TRUE(fast.ok()) << fast.status();
  const uint64_t fast_wait = system->report(*fast).cores.at(0).infeed_wait_cycles;
  // Only the first batch's transfer (1181 cycles) is waited for in full; the queue of 4 holds
  // the rest, which cross the link while the device works.
  EXPECT_LT(fast_wait, 4 * 1181u);
  EXPECT_LT(fast_wait * 10, slow_wait);
}

// The infeed queue's depth counts batches, as config.proto says: a core's batch for a step is one
// TensorFlow enqueue of a whole tuple, which the runtime cuts into the entries its infeed
// dequeues take. With batches of 8 small entries all ready at once, v3's queue of 4 holds 4
// whole batches (32 entries) while the device works, not 4 entries.
TEST(Feeds, TheInfeedQueueHoldsWholeBatchesOfManyEntries) {
  auto system = make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  constexpr uint32_t kBatches = 6, kEntries = 8;
  for (uint32_t b = 0; b < kBatches; ++b) {
    for (uint32_t k = 0; k < kEntries; ++k) {
      FeedEntry e;
      e.bytes = 4096;
      e.ends_batch = k + 1 == kEntries;
      ASSERT_TRUE(system->send_infeed(CoreId{1}, std::move(e), 0).ok());
    }
  }
  // A device busy long enough for the link to fill the queue (48 entries of 1,181 cycles each
  // would cross in 57,000 cycles), then the loop that drains it.
  isa::Program busy;
  busy.set_name("busy");
  CoreBuilder c(&busy, 1);
  c.loop(20000, [&] { c.binary_scalar(isa::Vector::MUL, kOut, kOut, 1.0f); });
  c.halt();
  auto waited = system->run(busy);
  ASSERT_TRUE(waited.ok()) << waited.status();
  ASSERT_GT(system->now_cycle(), 60000u);
  EXPECT_EQ(system->stats().value("chip0.core1.feeds.infeed_high_water"), 4.0 * kEntries);
  auto run = system->run(doubling_loop(kBatches * kEntries));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(system->take_outfeed(CoreId{1}).size(), kBatches * kEntries);
}

// A host whose answers depend on when the infeed thread took the previous step, as a bounded
// prefetch buffer makes them: it records what it was asked and told, in order.
class RecordingFeed final : public HostFeed {
 public:
  // Step 0 ready at `first`; each later one `gap` cycles after the previous was taken (0: at
  // once).
  RecordingFeed(uint64_t first, uint64_t gap) : first_(first), gap_(gap) {}
  uint64_t ready_cycle(uint64_t step) override {
    calls.push_back("ready " + std::to_string(step));
    if (step == 0) return first_;
    return gap_ == 0 ? 0 : taken_at.back() + gap_;
  }
  void taken(uint64_t step, uint64_t cycle) override {
    calls.push_back("taken " + std::to_string(step));
    taken_at.push_back(cycle);
  }
  std::vector<std::string> calls;
  std::vector<uint64_t> taken_at;

 private:
  uint64_t first_, gap_;
};

InfeedStep step_of(std::shared_ptr<HostFeed> feed, uint64_t index) {
  InfeedStep step;
  FeedEntry e;
  e.bytes = 4096;
  step.entries.emplace_back(CoreId{1}, std::move(e));
  step.feed = std::move(feed);
  step.index = index;
  return step;
}

// The infeed thread asks for step k only after it took step k-1, and takes it once the host has
// it ready and step k-1 crossed the link (1181 cycles). A host 3000 cycles behind each take
// paces the steps; one with every step ready paces them at the link's 1181 cycles.
TEST(Feeds, TheInfeedThreadTakesStepsInOrderAndTellsTheHost) {
  auto system = make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  auto paced = std::make_shared<RecordingFeed>(10000, 3000);
  for (uint64_t k = 0; k < 4; ++k) ASSERT_TRUE(system->queue_infeed_step(step_of(paced, k)).ok());
  const uint64_t start = system->now_cycle();
  auto run = system->run(doubling_loop(4));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(paced->calls, ::testing::ElementsAre("ready 0", "taken 0", "ready 1", "taken 1",
                                                   "ready 2", "taken 2", "ready 3", "taken 3"));
  EXPECT_THAT(paced->taken_at, ::testing::ElementsAre(10000, 13000, 16000, 19000));
  EXPECT_EQ(start, 0u);

  auto eager = std::make_shared<RecordingFeed>(0, 0);
  const uint64_t now = system->now_cycle();
  for (uint64_t k = 0; k < 4; ++k) ASSERT_TRUE(system->queue_infeed_step(step_of(eager, k)).ok());
  ASSERT_TRUE(system->run(doubling_loop(4)).ok());
  ASSERT_EQ(eager->taken_at.size(), 4u);
  for (uint64_t k = 0; k < 4; ++k) EXPECT_EQ(eager->taken_at[k], now + 1181 * k) << k;
}

// Each host of a slice has its own infeed thread (TPUEstimator's per-host enqueue): on v3-32's
// 4 hosts, core 1 (host 0) gets its 4 batches at the link's pace while host 1 has nothing ready
// for core 9 until cycle 100000, and host 1's thread then takes its steps on its own.
TEST(Feeds, EachHostsInfeedThreadTakesItsOwnSteps) {
  auto system = make_system("v3-32", {MxuPolicy::kTpu, true, nullptr});
  isa::Program p;
  for (uint32_t core : {1u, 9u}) {
    CoreBuilder c(&p, core);
    const uint32_t in = c.new_flag();
    const uint32_t done = c.new_flag();
    c.loop(4, [&] {
      c.infeed(kIn).signal(in);
      c.binary_scalar(isa::Vector::MUL, kOut, kIn, 2.0f).wait(in, 1).signal(done);
      c.outfeed(kOut).wait(done, 1);
    });
    c.halt();
  }
  auto eager = std::make_shared<RecordingFeed>(0, 0);
  auto late = std::make_shared<RecordingFeed>(100000, 0);
  for (uint64_t k = 0; k < 4; ++k) {
    InfeedStep mine = step_of(eager, k);
    InfeedStep theirs = step_of(late, k);
    theirs.entries[0].first = CoreId{9};
    theirs.host = 1;
    ASSERT_TRUE(system->queue_infeed_step(std::move(mine)).ok());
    ASSERT_TRUE(system->queue_infeed_step(std::move(theirs)).ok());
  }
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(eager->taken_at, ::testing::ElementsAre(0, 1181, 2362, 3543));
  EXPECT_THAT(late->taken_at, ::testing::ElementsAre(100000, 101181, 102362, 103543));
  InfeedStep nowhere = step_of(eager, 4);
  nowhere.host = 4;
  const absl::Status bad = system->queue_infeed_step(std::move(nowhere));
  EXPECT_THAT(std::string(bad.message()),
              ::testing::HasSubstr("infeed step 4: no host 4 (v3-32 has 4)"));
}

TEST(Feeds, WrongSizedBatchIsAnError) {
  auto system = make_system();
  FeedEntry e;
  e.bytes = 100;
  e.data.resize(100);
  ASSERT_TRUE(system->send_infeed(CoreId{1}, std::move(e), 0).ok());
  auto run = system->run(doubling_loop(1));
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              ::testing::HasSubstr(
                  "core 1 instruction 1 (infeed.dequeue): the infeed entry holds 100 bytes but the "
                  "destination block takes 4096"));
}

}  // namespace feeds_test
}  // namespace tpusim::sim
