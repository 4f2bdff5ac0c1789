#pragma once
// Runs the slice's collectives (ISA Collective instructions) over the interconnect. A member's
// collective unit hands its instruction here when it issues it; once every member of the group
// has (the wait before is the member's "waiting for peers"), the engine computes the results
// (collective_numerics.h) and moves the data chunk by chunk along the plan (ring_plan.h): each
// chunk transfer is an event in one queue shared by every collective in flight, taken in time
// order as simulated time reaches it, so collectives that share links interleave on them and
// each link's FIFO arbiter shares its bandwidth. One SystemC wait per distinct event time, not
// per byte or cycle: a 1024-chip pod's all-reduce stays cheap. A member's part is done when the
// last chunk it is due has landed (and, when reducing, been added on its vector unit) and its
// results are written to HBM.
//
// HBM traffic: a member streams the chunks it starts a pass with out of its HBM (the link cannot
// finish a chunk before the read has, nor start it before the read's latency); a chunk it
// receives to add to is added to its own part, read from HBM; a final value (the end of a
// reduce-scatter, every all-gather or permute chunk) is written to HBM when it has landed (and
// been added). What it forwards comes from on-chip buffers. These requests go to the chip's HBM
// channel arbiters like any DMA's, so collectives and DMAs on a chip share its bandwidth.
//
// Phases (torus2d: rows, columns, rows; torus: X, Y, Z, Y, X in each part) run as dataflow: a
// member's own part in a later phase is what an earlier one wrote to its dst, and a chunk that
// sends or adds to it waits until every byte it covers has been written there, not for the whole
// earlier phase. So a member's columns start on the first segment its row has reduced while the
// rows still move the rest.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <systemc>
#include <vector>

#include "configs/slice_spec.h"
#include "sim/clock.h"
#include "sim/memory/memory.h"
#include "sim/net/interconnect.h"
#include "sim/net/member_buffer.h"
#include "sim/net/ring_plan.h"
#include "sim/net/topology.h"
#include "sim/stats/rate_counter.h"
#include "sim/stats/stat_group.h"
#include "sim/timing/hbm_timing.h"
#include "sim/units/numerics_worker.h"

namespace tpusim::sim {

class CollectiveEngine : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(CollectiveEngine);
  CollectiveEngine(const sc_core::sc_module_name& name, const config::SliceSpec& slice,
                   const ClockDomain& clock, StatGroup& stats,
                   std::function<void(const std::string&)> fail);

  // One core's HBM as the collectives see it: its chip's memory (for the values) and channel
  // arbiters (for the timing), and the core's HBM bandwidth counter track.
  struct CoreHbm {
    Memory* memory = nullptr;
    HbmTiming* timing = nullptr;
    RateCounter* bandwidth = nullptr;
    const bool* shadow = nullptr;  // the core runs a shadow this run: its counter stays quiet
  };
  // What a member's part of its latest collective moved and computed.
  struct MemberWork {
    double flops = 0;      // additions on its vector unit
    double hbm_bytes = 0;  // read and written in its chip's HBM
    double ici_bytes = 0;  // sent over the links
  };
  // Every core's HBM (index: global core).
  void set_hbm(std::vector<CoreHbm> per_core) { hbm_ = std::move(per_core); }
  // The slice's NumericsWorker: the DMAs that wrote what a collective reads may still be queued.
  void set_numerics(NumericsWorker* numerics) { numerics_ = numerics; }
  // Link utilisation counter tracks on `sink` (interconnect.h).
  void observe(traces::Sink* sink) { interconnect_.observe(sink, clock_); }
  void flush_trace_counters() { interconnect_.flush_trace_counters(); }
  // Every core's count of collectives back to 0: a new run.
  void begin_run();

  // Core `core` issues `c` (instruction `index` of its stream) at `cycle`.
  void arrive(uint32_t core, const isa::Collective& c, int index, uint64_t cycle, bool functional);
  // What the member waits for while the rest of its group has not issued its collective ("" once
  // it started), for deadlock messages: formatted only when asked, since a pod's collective has
  // thousands of members arriving one by one.
  std::string waiting_for(uint32_t core) const;
  bool done(uint32_t core) const { return members_[core].done; }
  const sc_core::sc_event& done_event(uint32_t core) const { return *members_[core].done_event; }
  // When the member's collective started (its last peer arrived) and when its part was done.
  double start_cycle(uint32_t core) const { return members_[core].start; }
  double finish_cycle(uint32_t core) const { return members_[core].finish; }
  const MemberWork& work(uint32_t core) const { return members_[core].work; }

  const Topology& topology() const { return topology_; }
  const Interconnect& interconnect() const { return interconnect_; }

 private:
  struct Instance;
  struct Event {
    double time = 0;
    uint64_t order = 0;   // ties: in the order made, so runs are reproducible
    uint32_t run = 0;     // PassRun index
    uint32_t member = 0;  // ring index of the member that has the chunk
    uint32_t step = 0;    // steps == the pass's steps: the chunk has landed
    uint32_t segment = 0;
    uint32_t chunk = 0;
    bool add_waiting = false;  // landed, to be added to the member's part once that is final
    bool operator>(const Event& o) const {
      return time != o.time ? time > o.time : order > o.order;
    }
  };
  struct PassRun {
    size_t instance = 0;
    const RingPass* pass = nullptr;  // null for a PERMUTE
    std::vector<uint32_t> cores;     // ring order (PERMUTE: the members)
    std::vector<uint32_t> next;      // ring index each member sends to
    std::vector<uint32_t> slot;      // ring index -> the member's index in the instance's cores
    uint32_t steps = 0;
    uint32_t phase = 0;
    bool keeps_finals = false;  // a later phase waits for what this pass makes final
    // Per ring index: the earlier phase whose results are the member's own data here (-1: none,
    // the member's src).
    std::vector<int> after;
    std::vector<uint64_t> due;    // per ring index: chunks still to land in the final step
    std::vector<double> landed;   // per ring index: when the last of them landed
    std::vector<double> written;  // per ring index: when its last HBM write of the pass ends
    // Per ring index: the route to the member it sends to, looked up at its first chunk.
    std::vector<const std::vector<uint32_t>*> routes;
  };
  // The byte ranges of a member's buffer a phase has made final (written to its dst), and the
  // events of later phases that wait for a range not yet final, keyed by its first missing byte.
  struct Finals {
    std::map<uint64_t, std::pair<uint64_t, double>> ranges;  // begin -> (end, when written)
    std::multimap<uint64_t, Event> waiting;
  };
  struct Member {
    uint64_t issued = 0;  // collectives issued this run
    bool done = true;
    double start = 0, finish = 0;
    size_t instance = 0;
    uint32_t passes_left = 0;
    std::unique_ptr<sc_core::sc_event> done_event;
    MemberWork work;
  };
  struct Instance {
    isa::Collective c;
    std::vector<uint32_t> cores;         // members in ring order
    std::vector<uint32_t> peers;         // PERMUTE: per member
    std::vector<MemberBuffer> src, dst;  // per member: its own buffers in its HBM
    std::vector<uint32_t> arrived;
    uint64_t number = 0;  // the members' collective count
    bool functional = true;
    std::string first_issue;  // "core C instruction I", for messages
    double started = 0;
    CollectivePlan plan;
    std::vector<std::vector<Finals>> finals;  // [member][phase], when a later phase needs them
  };

  void start(size_t instance, double cycle);
  void compute_values(Instance& in);
  // Fills in the instance's pass runs from `first_run` on: member slots, what each member is
  // due, which earlier phase each member's part comes from, and which passes keep their finals.
  void link_runs(Instance& in, size_t first_run);
  void join_pass(size_t run, uint32_t member, double cycle);
  void process(const Event& e);
  // When the member's own data in [begin, end) was final in HBM: the collective's start in a
  // first phase, -1 when a byte is not yet (the first such in `*missing`).
  double own_data_written(const PassRun& r, uint32_t member, uint64_t begin, uint64_t end,
                          uint64_t* missing) const;
  // When the own data in [begin, end) of the member holding `e` was final in HBM, if by `e.time`.
  // If not, `e` is queued again for when it is, and -1 returned.
  double own_data_ready(const Event& e, uint64_t begin, uint64_t end);
  // The member has written [begin, end) of its dst at `cycle`, final for the pass's phase.
  void made_final(const PassRun& r, uint32_t member, uint64_t begin, uint64_t end, double cycle);
  void member_finished_pass(size_t run, uint32_t member, double cycle);
  void push(Event e);
  uint64_t chunks(const PassRun& r, uint32_t segment) const;
  double chunk_bytes(const PassRun& r, uint32_t segment, uint32_t chunk) const;
  // Where the chunk starts in a member's buffer, in bytes.
  uint64_t chunk_offset(const PassRun& r, uint32_t segment, uint32_t chunk) const;
  uint64_t chunk_size(const PassRun& r) const;
  // Core `core` moves `bytes` at `offset` of its `buffer`, asked at `cycle`; returns the cycle
  // the last byte has moved.
  double hbm_access(uint32_t core, const MemberBuffer& buffer, uint64_t offset, double bytes,
                    double cycle);
  uint64_t segment_elements(const PassRun& r, uint32_t segment) const;
  void thread();

  const config::SliceSpec& slice_;
  const ClockDomain& clock_;
  std::function<void(const std::string&)> fail_;
  Topology topology_;
  Interconnect interconnect_;
  std::vector<CoreHbm> hbm_;
  NumericsWorker* numerics_ = nullptr;
  std::vector<Member> members_;
  std::deque<Instance> instances_;  // a deque: passes point into their plans
  std::map<std::pair<uint64_t, std::vector<uint32_t>>, size_t> open_;  // not yet started
  std::deque<PassRun> runs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t order_ = 0;
  sc_core::sc_event work_;
  double vector_elements_per_cycle_ = 1;
  uint64_t collectives_ = 0, chunk_transfers_ = 0;
  double hbm_bytes_ = 0;
};

}  // namespace tpusim::sim
