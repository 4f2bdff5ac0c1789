// The collectives' chunk schedule without a simulator: its steps against a model of HBM and
// links simple enough to work the times out by hand. What each member sends, receives and adds
// in which order, the HBM reads and writes each step costs, the just-in-time reads, and torus2d's
// phases running as dataflow.
#include "sim/net/chunk_schedule.h"

#include <limits>
#include <map>
#include <utility>

#include <gtest/gtest.h>

#include "configs/loader.h"

namespace tpusim::sim {
namespace chunk_schedule_test {

using C = isa::Collective;

const Topology& v3_8() {  // 4 x 2 cores: rows {0, 1, 2, 3} and {4, 5, 6, 7}
  static const Topology topology = [] {
    auto slice = config::load_slice("v3-8");
    EXPECT_TRUE(slice.ok()) << slice.status();
    return Topology(**slice);
  }();
  return topology;
}

// Each core's HBM serves every request at once (no contention): its last byte `hbm_latency`
// plus its bytes at `hbm_rate` after it is asked. Each ordered pair of cores has one link, a
// FIFO at `link_rate` bytes per cycle whose last byte lands `link_latency` after it finished.
// Records every call in order.
struct Model final : ChunkSchedule::Resources {
  double hbm_latency_cycles = 0, hbm_rate = std::numeric_limits<double>::infinity();
  double link_latency = 0, link_rate = 1;

  struct Call {
    bool send = false;  // a transfer; else an HBM access
    uint32_t core = 0;  // the HBM's core, or the sender
    uint32_t to = 0;
    const MemberBuffer* buffer = nullptr;
    uint64_t offset = 0;
    double bytes = 0, cycle = 0;  // asked (HBM) or first byte on the link (send)
    double end = 0;               // the last byte moved (HBM) or landed (send)
  };
  std::vector<Call> calls;
  std::map<uint32_t, double> finished_at;

  double hbm_transfer(CoreId core, const MemberBuffer& buffer, uint64_t offset, double bytes,
                      double cycle) override {
    const double end = cycle + hbm_latency_cycles + bytes / hbm_rate;
    calls.push_back({false, index(core), 0, &buffer, offset, bytes, cycle, end});
    return end;
  }
  double hbm_latency(CoreId) const override { return hbm_latency_cycles; }
  double hbm_bytes_per_cycle(CoreId) const override { return hbm_rate; }
  // A route here is the two cores' numbers: the model's one link between them.
  const std::vector<uint32_t>& route(CoreId from, CoreId to, TieBreak) override {
    const std::pair<uint32_t, uint32_t> ends{index(from), index(to)};
    return routes.try_emplace(ends, std::vector<uint32_t>{ends.first, ends.second}).first->second;
  }
  TransferTimes transfer(const std::vector<uint32_t>& route, double first_byte, double bytes,
                         double last_byte) override {
    double& free = free_at[{route[0], route[1]}];
    const double start = std::max(first_byte, free);
    free = std::max(start + bytes / link_rate, last_byte);
    calls.push_back({true, route[0], route[1], nullptr, 0, bytes, start, free + link_latency});
    return {free, free + link_latency};
  }
  void finished(CoreId core, double cycle) override { finished_at[index(core)] = cycle; }

  std::vector<Call> sends_from(uint32_t core) const {
    std::vector<Call> out;
    for (const Call& c : calls)
      if (c.send && c.core == core) out.push_back(c);
    return out;
  }
  // Core `core`'s accesses to `buffer`: bytes per offset.
  std::map<uint64_t, double> accesses(uint32_t core, const MemberBuffer& buffer) const {
    std::map<uint64_t, double> out;
    for (const Call& c : calls)
      if (!c.send && c.core == core && c.buffer == &buffer) out[c.offset] += c.bytes;
    return out;
  }

 private:
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> routes;
  std::map<std::pair<uint32_t, uint32_t>, double> free_at;
};

struct Fixture {
  explicit Fixture(double vector_elements_per_cycle = 16)
      : rendezvous(v3_8(), 8), schedule(v3_8(), 8, vector_elements_per_cycle, model) {}

  // Every member issues `c` at `cycle` (PERMUTE: member i sends to peers[i]); the last one
  // starts it.
  const CollectiveGroup& start(const C& c, double cycle, const std::vector<uint32_t>& peers = {}) {
    const std::vector<CoreId> members = collective_members(c, v3_8());
    const CollectiveGroup* group = nullptr;
    for (size_t i = 0; i < members.size(); ++i) {
      C mine = c;
      if (!peers.empty()) mine.set_peer(peers[i]);
      std::string error;
      group = rendezvous.arrive(members[i], mine, 0, false, &error);
      EXPECT_EQ(error, "");
      schedule.issued(members[i], cycle);
    }
    EXPECT_NE(group, nullptr);
    schedule.start(*group, cycle);
    return *group;
  }
  void run() {
    while (!schedule.idle()) schedule.run_until(schedule.next_time());
  }

  Model model;
  CollectiveRendezvous rendezvous;
  ChunkSchedule schedule;
};

C collective(C::Kind kind, C::Algorithm algorithm, uint64_t elements, uint64_t chunk_bytes,
             std::vector<uint32_t> group) {
  C c;
  c.set_kind(kind);
  c.set_algorithm(algorithm);
  c.set_elements(elements);
  c.set_chunk_bytes(chunk_bytes);
  for (uint32_t core : group) c.add_group(core);
  return c;
}

// Two members, one chunk per segment (n = 8192 bytes, halves of 4096): each sends its half,
// the other adds it (1024 elements at 16 a cycle) and sends the sum back. 2 (latency + n/2/B)
// + n/8/V = 2 (100 + 512) + 64 = 1288 cycles after the start; HBM here costs nothing.
TEST(ChunkSchedule, TwoMembersAllReduceInTwoHopsAndOneAdd) {
  Fixture f;
  f.model.link_latency = 100;
  f.model.link_rate = 8;
  f.start(collective(C::ALL_REDUCE, C::RING, 2048, 0, {0, 1}), 10);
  EXPECT_FALSE(f.schedule.done(CoreId{0}));
  EXPECT_TRUE(f.model.calls.empty());  // starting queues the first chunks, nothing more
  f.run();
  for (uint32_t core : {0, 1}) {
    EXPECT_TRUE(f.schedule.done(CoreId{core}));
    EXPECT_EQ(f.model.finished_at.at(core), 1298) << core;
    EXPECT_EQ(f.schedule.start_cycle(CoreId{core}), 10);
    EXPECT_EQ(f.schedule.finish_cycle(CoreId{core}), 1298);
    // Reads its n bytes once (its half to send, the other to add to), writes them once; sends
    // 2(p-1)/p n; adds half the elements.
    EXPECT_EQ(f.schedule.work(CoreId{core}).hbm_bytes, 2 * 8192.0);
    EXPECT_EQ(f.schedule.work(CoreId{core}).ici_bytes, 8192.0);
    EXPECT_EQ(f.schedule.work(CoreId{core}).flops, 1024.0);
  }
  EXPECT_EQ(f.schedule.chunk_transfers(), 4);
  EXPECT_EQ(f.schedule.hbm_bytes(), 4 * 8192.0);
  f.schedule.reset_stats();
  EXPECT_EQ(f.schedule.chunk_transfers(), 0);
  EXPECT_EQ(f.schedule.hbm_bytes(), 0);
}

// Four members, one 4096-byte chunk per segment: member i starts with segment i-1 (read from
// its src just before it goes on the link), reads every segment of its src once (the others to
// add to), writes every segment of its dst once, and sends only to member i+1, 2(p-1) chunks.
TEST(ChunkSchedule, RingMembersSendTheirSegmentsInRingOrder) {
  Fixture f;
  f.model.link_latency = 10;
  const CollectiveGroup& g = f.start(collective(C::ALL_REDUCE, C::RING, 4096, 0, {0, 1, 2, 3}), 0);
  f.run();
  const std::map<uint64_t, double> every_segment = {
      {0, 4096.0}, {4096, 4096.0}, {8192, 4096.0}, {12288, 4096.0}};
  for (uint32_t i = 0; i < 4; ++i) {
    const std::vector<Model::Call> sends = f.model.sends_from(i);
    ASSERT_EQ(sends.size(), 6u) << i;
    for (const Model::Call& s : sends) EXPECT_EQ(s.to, (i + 1) % 4);
    // The call before the member's first send is its read of what it sends.
    const auto first = std::find_if(f.model.calls.begin(), f.model.calls.end(),
                                    [&](const Model::Call& c) { return c.send && c.core == i; });
    ASSERT_NE(first, f.model.calls.begin());
    const Model::Call& read = *(first - 1);
    EXPECT_EQ(read.core, i);
    EXPECT_EQ(read.buffer, &g.src[i]);
    EXPECT_EQ(read.offset, (i + 3) % 4 * 4096u);
    EXPECT_EQ(f.model.accesses(i, g.src[i]), every_segment) << i;
    EXPECT_EQ(f.model.accesses(i, g.dst[i]), every_segment) << i;
    EXPECT_EQ(f.schedule.work(CoreId{i}).ici_bytes, 6 * 4096.0);
  }
}

// A member's next chunk is read just in time to follow the one before onto the link: asked one
// HBM latency plus the read before the link frees. Chunk 0 of member 0 is read from cycle 0 to
// 50 + 2048/16 = 178, leaves from 50 at 4 bytes a cycle, and holds the link until 562; chunk 1
// is asked at 562 - 178 = 384.
TEST(ChunkSchedule, ReadsFollowTheLinkInsteadOfQueueingAtOnce) {
  Fixture f;
  f.model.hbm_latency_cycles = 50;
  f.model.hbm_rate = 16;
  f.model.link_latency = 100;
  f.model.link_rate = 4;
  const CollectiveGroup& g = f.start(collective(C::ALL_REDUCE, C::RING, 2048, 2048, {0, 1}), 0);
  f.run();
  const std::vector<Model::Call> sends = f.model.sends_from(0);
  ASSERT_GE(sends.size(), 2u);
  EXPECT_EQ(sends[0].cycle, 50);  // the read's first byte
  EXPECT_EQ(sends[1].cycle, 562);
  const auto second = std::find_if(
      f.model.calls.begin(), f.model.calls.end(),
      [&](const Model::Call& c) { return c.send && c.core == 0 && c.cycle == sends[1].cycle; });
  const Model::Call& read = *(second - 1);
  EXPECT_EQ(read.buffer, &g.src[0]);
  EXPECT_EQ(read.offset, 4096u + 2048u);  // segment 1, chunk 1
  EXPECT_EQ(read.cycle, 384);
}

// An all-gather member sends its own src (n bytes, read once), copies it into its part of the
// result, and writes every other member's part as it lands: the whole dst (k n bytes) once.
TEST(ChunkSchedule, AnAllGatherReadsOnlyItsOwnSegment) {
  Fixture f;
  const CollectiveGroup& g =
      f.start(collective(C::ALL_GATHER, C::RING, 1024, 1024, {0, 1, 2, 3}), 0);
  f.run();
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.model.accesses(i, g.src[i]),
              (std::map<uint64_t, double>{{0, 1024}, {1024, 1024}, {2048, 1024}, {3072, 1024}}));
    const std::map<uint64_t, double> written = f.model.accesses(i, g.dst[i]);
    ASSERT_EQ(written.size(), 16u);
    EXPECT_EQ(written.begin()->first, 0u);
    EXPECT_EQ(written.rbegin()->first, 15 * 1024u);
    for (const auto& [offset, bytes] : written) EXPECT_EQ(bytes, 1024) << offset;
    EXPECT_EQ(f.schedule.work(CoreId{i}).hbm_bytes, 4096 + 4 * 4096);
    EXPECT_EQ(f.schedule.work(CoreId{i}).flops, 0);
  }
}

// A permute sends each member's buffer straight to its peer, chunk by chunk: read once, written
// once at the peer.
TEST(ChunkSchedule, APermuteSendsEachBufferToItsPeer) {
  Fixture f;
  const CollectiveGroup& g = f.start(
      collective(C::PERMUTE, C::ALGORITHM_UNSPECIFIED, 1024, 2048, {0, 1, 2, 3}), 0, {3, 0, 1, 2});
  f.run();
  for (uint32_t i = 0; i < 4; ++i) {
    const std::vector<Model::Call> sends = f.model.sends_from(i);
    ASSERT_EQ(sends.size(), 2u);
    for (const Model::Call& s : sends) EXPECT_EQ(s.to, (i + 3) % 4);
    EXPECT_EQ(f.model.accesses(i, g.src[i]), (std::map<uint64_t, double>{{0, 2048}, {2048, 2048}}));
    EXPECT_EQ(f.model.accesses(i, g.dst[i]), (std::map<uint64_t, double>{{0, 2048}, {2048, 2048}}));
    EXPECT_TRUE(f.schedule.done(CoreId{i}));
  }
}

// A member alone has nothing to send or receive: done at the start, with no event queued.
TEST(ChunkSchedule, AMemberAloneIsDoneAtTheStart) {
  Fixture f;
  f.start(collective(C::ALL_REDUCE, C::RING, 1024, 0, {5}), 7);
  EXPECT_TRUE(f.schedule.idle());
  EXPECT_TRUE(f.schedule.done(CoreId{5}));
  EXPECT_EQ(f.model.finished_at.at(5), 7);
  EXPECT_EQ(f.schedule.finish_cycle(CoreId{5}), 7);
}

// torus2d on v3-8: the rows reduce-scatter (8 members x 3 steps x 16 chunks = 384 sends), the
// columns {x, x+4} all-reduce what their rows left them, the rows all-gather. The phases run as
// dataflow: the columns start on the first ranges the rows have reduced, while the rows still
// reduce the rest. (No row send before the first column send can belong to the all-gather,
// which needs the columns' results.)
TEST(ChunkSchedule, Torus2dColumnsStartBeforeTheRowsHaveReduced) {
  Fixture f;
  f.model.hbm_latency_cycles = 50;
  f.model.hbm_rate = 64;
  f.model.link_latency = 100;
  f.model.link_rate = 8;
  f.start(collective(C::ALL_REDUCE, C::TORUS_2D, 4096, 256, {}), 0);
  f.run();
  double first_column = std::numeric_limits<double>::infinity();
  size_t row_sends = 0, column_sends = 0;
  for (const Model::Call& c : f.model.calls) {
    if (!c.send) continue;
    const bool row = c.core / 4 == c.to / 4;
    ++(row ? row_sends : column_sends);
    if (!row) first_column = std::min(first_column, c.cycle);
  }
  EXPECT_EQ(row_sends, 2 * 384u);
  EXPECT_EQ(column_sends, 4 * 2 * 2 * 8u);  // 2 steps of 8 chunks of each half-segment
  size_t rows_before = 0;
  for (const Model::Call& c : f.model.calls)
    if (c.send && c.core / 4 == c.to / 4 && c.cycle < first_column) ++rows_before;
  EXPECT_GT(rows_before, 0u);
  EXPECT_LT(rows_before, 384u);
  for (uint32_t core = 0; core < 8; ++core) EXPECT_TRUE(f.schedule.done(CoreId{core})) << core;
}

}  // namespace chunk_schedule_test
}  // namespace tpusim::sim
