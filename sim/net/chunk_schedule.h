#pragma once
// What the members of the slice's started collectives do, chunk by chunk, and when (plain C++:
// no SystemC, no simulated clock of its own). A started collective's plan (ring_plan.h) becomes
// pass runs; each member's data moves along them in chunks, and every chunk at a member is an
// event in one queue shared by every collective in flight. The owner of time (the collective
// engine, collective_engine.h) runs the queue up to each cycle it reaches; each event asks the
// Resources for the HBM and link times its step costs and queues what follows, so collectives
// that share links or HBM interleave on their arbiters in time order.
//
// A step: a member starts a pass by streaming its own data out of its HBM (the link cannot finish
// a chunk before the read has, nor start it before the read's latency) and reading each next
// chunk just in time to follow the previous one onto the link; a chunk it receives while
// reducing is added on its vector unit to its own part, read from HBM; a final value (the end of
// a reduce-scatter, every all-gather or permute chunk) is written to HBM when it has landed
// (and been added). What it forwards comes from on-chip buffers. A member's part is done when the
// last chunk it is due has landed and its last write has ended.
//
// Phases (torus2d: rows, columns, rows; torus: X, Y, Z, Y, X in each part) run as dataflow: a
// member's own part in a later phase is what an earlier one wrote to its dst, and a chunk that
// sends or adds to it waits until every byte it covers has been written there (final_ranges.h),
// not for the whole earlier phase.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <vector>

#include "sim/net/collective_rendezvous.h"
#include "sim/net/final_ranges.h"
#include "sim/net/interconnect.h"
#include "sim/net/member_buffer.h"
#include "sim/net/pass_run.h"
#include "sim/net/ring_plan.h"
#include "sim/net/topology.h"

namespace tpusim::sim {

class ChunkSchedule {
 public:
  // The HBM and link times a step costs, and where a member's completion goes. The collective
  // engine drives the slice's HBM timing and interconnect through these; a test can model them.
  // Times are fractional core cycles. Calls come in the order the schedule takes its events
  // (time order, ties in the order queued): the order FIFO arbiters behind them serve them in.
  class Resources {
   public:
    virtual ~Resources() = default;
    // Core `core` moves `bytes` at byte `offset` of `buffer` (read or written: the arbiters do
    // not tell them apart), asked at `cycle`; returns the cycle the last byte has moved.
    virtual double hbm_transfer(CoreId core, const MemberBuffer& buffer, uint64_t offset,
                                double bytes, double cycle) = 0;
    virtual double hbm_latency(CoreId core) const = 0;          // cycles
    virtual double hbm_bytes_per_cycle(CoreId core) const = 0;  // the chip's, all channels
    // The links from core `from` to `to`; the reference stays valid for the Resources' life.
    virtual const std::vector<uint32_t>& route(CoreId from, CoreId to, TieBreak ties) = 0;
    // Sends `bytes` along `route`, the first byte ready at `first_byte` and the last at
    // `last_byte` (Interconnect::transfer_along).
    virtual TransferTimes transfer(const std::vector<uint32_t>& route, double first_byte,
                                   double bytes, double last_byte) = 0;
    // Core `core`'s part of its latest collective ended at `cycle`.
    virtual void finished(CoreId core, double cycle) = 0;
  };

  // What a member's part of its latest collective moved and computed.
  struct MemberWork {
    double flops = 0;      // additions on its vector unit
    double hbm_bytes = 0;  // read and written in its chip's HBM
    double ici_bytes = 0;  // sent over the links
  };

  // `cores`: the slice's; `vector_elements_per_cycle`: a vector unit's f32 additions per cycle.
  ChunkSchedule(const Topology& topology, uint32_t cores, double vector_elements_per_cycle,
                Resources& resources);

  // Forgets every collective and queued event: a new run.
  void begin_run();
  // Core `core` issued a collective at `cycle`: its part is not done until that one has run.
  void issued(CoreId core, double cycle);
  // Starts `group` (every member has issued it, collective_rendezvous.h) at `cycle`: plans it,
  // queues each member's first chunks, and finishes members with nothing to receive. Returns the
  // plan (empty for a PERMUTE), valid until begin_run; `group` must stay valid as long.
  const CollectivePlan& start(const CollectiveGroup& group, double cycle);

  bool idle() const { return queue_.empty(); }
  // The cycle of the earliest queued event (not idle()).
  double next_time() const { return queue_.top().time; }
  // Takes every event due by `cycle`, in time order, those it queues for by `cycle` too.
  void run_until(double cycle) {
    while (!queue_.empty() && queue_.top().time <= cycle) {
      const ChunkEvent e = queue_.top();
      queue_.pop();
      process(e);
    }
  }

  bool done(CoreId core) const { return state(core).done; }
  // When the member's collective started (its last peer arrived) and when its part was done.
  double start_cycle(CoreId core) const { return state(core).start; }
  double finish_cycle(CoreId core) const { return state(core).finish; }
  const MemberWork& work(CoreId core) const { return state(core).work; }

  // Statistics since the last reset_stats (every collective, every core).
  double chunk_transfers() const { return static_cast<double>(chunk_transfers_); }
  double hbm_bytes() const { return hbm_bytes_; }
  void reset_stats();

 private:
  struct Member {
    bool done = true;
    double start = 0, finish = 0;
    uint32_t passes_left = 0;
    MemberWork work;
  };
  struct Instance {
    const CollectiveGroup* group = nullptr;
    double started = 0;
    CollectivePlan plan;
    std::vector<std::vector<FinalRanges>> finals;  // [member][phase], when a later phase needs
  };

  Member& state(CoreId core) { return members_[index(core)]; }
  const Member& state(CoreId core) const { return members_[index(core)]; }
  void add_runs(size_t instance);
  // Fills in the instance's pass runs from `first_run` on: member slots, what each member is
  // due, which earlier phase each member's part comes from, and which passes keep their finals.
  void link_runs(Instance& in, size_t first_run);
  void join_pass(size_t run, uint32_t member, double cycle);
  void process(const ChunkEvent& e);
  // A landed chunk waited for the member's own part; adds it once that is final.
  void add_when_ready(const ChunkEvent& e, uint64_t offset, double bytes);
  // The member has the chunk's final value: writes it to its dst.
  void write_final(PassRun& run, const ChunkEvent& e, uint64_t offset, double bytes);
  // Sends the chunk on to the next member, reading it from HBM in a pass's first step.
  void send(PassRun& run, const ChunkEvent& e, uint64_t offset, double bytes);
  // The event of the chunk sent by `e` landing at member `to` at `arrival`, added there first
  // when reducing.
  ChunkEvent receive(PassRun& run, const ChunkEvent& e, uint32_t to, uint64_t offset, double bytes,
                     double arrival);
  // The member's own data: its src in a collective's first phase, what an earlier phase left in
  // its dst after that.
  const MemberBuffer& own_buffer(const PassRun& r, uint32_t member) const;
  // When the member's own data in [begin, end) was final in HBM: the collective's start in a
  // first phase, -1 when a byte is not yet (the first such in `*missing`).
  double own_data_written(const PassRun& r, uint32_t member, uint64_t begin, uint64_t end,
                          uint64_t* missing) const;
  // When the own data in [begin, end) of the member holding `e` was final in HBM, if by `e.time`.
  // If not, `e` is queued again for when it is, and -1 returned.
  double own_data_ready(const ChunkEvent& e, uint64_t begin, uint64_t end);
  // The member has written [begin, end) of its dst at `cycle`, final for the pass's phase.
  void made_final(const PassRun& r, uint32_t member, uint64_t begin, uint64_t end, double cycle);
  void member_finished_pass(size_t run, uint32_t member, double cycle);
  // Core `core` moves `bytes` at `offset` of its `buffer`, asked at `cycle`, counted in its
  // work; returns the cycle the last byte has moved.
  double hbm(CoreId core, const MemberBuffer& buffer, uint64_t offset, double bytes, double cycle);
  void push(ChunkEvent e) {
    e.order = order_++;
    queue_.push(e);
  }

  const Topology& topology_;
  Resources& resources_;
  double vector_elements_per_cycle_;
  std::vector<Member> members_;     // by core
  std::deque<Instance> instances_;  // a deque: passes point into their plans
  std::deque<PassRun> runs_;
  std::priority_queue<ChunkEvent, std::vector<ChunkEvent>, std::greater<ChunkEvent>> queue_;
  uint64_t order_ = 0;
  uint64_t chunk_transfers_ = 0;
  double hbm_bytes_ = 0;
};

}  // namespace tpusim::sim
