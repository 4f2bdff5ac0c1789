#pragma once
// Runs the slice's collectives (ISA Collective instructions) over the interconnect: the one
// SystemC module of the collectives, the part that owns time. A member's collective unit hands
// its instruction here when it issues it; the rendezvous (collective_rendezvous.h) gathers the
// group, and once every member has issued it (the wait before is the member's "waiting for
// peers") the engine writes the results (collective_values.h) and starts it on the chunk schedule
// (chunk_schedule.h), which decides what each member sends, receives and adds in which order.
//
// The engine's thread waits until the schedule's earliest event, then has the schedule take
// every event due by then; the schedule's steps cost HBM and link time through the engine, which
// drives the chips' HBM channel arbiters (shared with the cores' DMAs) and the interconnect's
// link arbiters, and notifies each member's completion once, at the cycle its part is done. One
// SystemC wait per distinct event time, not per byte or cycle, and nothing ticks: a 1024-chip
// pod's all-reduce stays cheap.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "configs/slice_spec.h"
#include "sim/clock.h"
#include "sim/memory/memory.h"
#include "sim/net/chunk_schedule.h"
#include "sim/net/collective_rendezvous.h"
#include "sim/net/interconnect.h"
#include "sim/net/topology.h"
#include "sim/stats/rate_counter.h"
#include "sim/stats/stat_group.h"
#include "sim/timing/hbm_timing.h"
#include "sim/units/core_memory.h"
#include "sim/units/numerics_worker.h"

namespace tpusim::sim {

class CollectiveEngine : public sc_core::sc_module, private ChunkSchedule::Resources {
 public:
  SC_HAS_PROCESS(CollectiveEngine);
  CollectiveEngine(const sc_core::sc_module_name& name, const config::SliceSpec& slice,
                   const ClockDomain& clock, StatGroup& stats,
                   std::function<void(const std::string&)> fail);

  // One core's HBM as the collectives see it: its chip's memory (for the values) and channel
  // arbiters (for the timing), and the core's HBM bandwidth counter track (CoreHbm; not its DMA
  // mirrors), quiet while the core runs a shadow.
  struct MemberHbm {
    CoreHbm* hbm = nullptr;
    const bool* shadow = nullptr;  // CoreContext::shadow_flag
  };
  // What a member's part of its latest collective moved and computed.
  using MemberWork = ChunkSchedule::MemberWork;
  // Every core's HBM, by core.
  void set_hbm(std::vector<MemberHbm> per_core) { hbm_ = std::move(per_core); }
  // The slice's NumericsWorker: the DMAs that wrote what a collective reads may still be queued.
  void set_numerics(NumericsWorker* numerics) { numerics_ = numerics; }
  // Link utilisation counter tracks on `sink` (interconnect.h).
  void observe(traces::Sink* sink) { interconnect_.observe(sink, clock_); }
  void flush_trace_counters() { interconnect_.flush_trace_counters(); }
  // Every core's count of collectives back to 0: a new run.
  void begin_run();
  // After a failed run, before its thread restarts: no collective open or in flight, every
  // link free.
  void abandon_run();

  // Core `core` issues `c` (instruction `index` of its stream) at `cycle`.
  void arrive(CoreId core, const isa::Collective& c, int index, uint64_t cycle, bool functional);
  // What the member waits for while the rest of its group has not issued its collective ("" once
  // it started), for deadlock messages.
  std::string waiting_for(CoreId core) const { return rendezvous_.waiting_for(core); }
  bool done(CoreId core) const { return schedule_.done(core); }
  const sc_core::sc_event& done_event(CoreId core) const { return *done_events_[index(core)]; }
  // When the member's collective started (its last peer arrived) and when its part was done.
  double start_cycle(CoreId core) const { return schedule_.start_cycle(core); }
  double finish_cycle(CoreId core) const { return schedule_.finish_cycle(core); }
  const MemberWork& work(CoreId core) const { return schedule_.work(core); }

  const Topology& topology() const { return topology_; }
  const Interconnect& interconnect() const { return interconnect_; }

 private:
  void start(const CollectiveGroup& group, double cycle);
  void add_stats(StatGroup& stats);
  void thread();

  // ChunkSchedule::Resources: the chips' HBM arbiters and bandwidth counters, the links.
  double hbm_transfer(CoreId core, const MemberBuffer& buffer, uint64_t offset, double bytes,
                      double cycle) override;
  double hbm_latency(CoreId core) const override {
    return hbm_[index(core)].hbm->timing().latency_cycles();
  }
  double hbm_bytes_per_cycle(CoreId core) const override {
    return hbm_[index(core)].hbm->timing().bytes_per_cycle();
  }
  const std::vector<uint32_t>& route(CoreId from, CoreId to, TieBreak ties) override {
    return interconnect_.route(from, to, ties);
  }
  TransferTimes transfer(const std::vector<uint32_t>& route, double first_byte, double bytes,
                         double last_byte) override {
    return interconnect_.transfer_along(route, first_byte, bytes, last_byte);
  }
  void finished(CoreId core, double cycle) override;

  const ClockDomain& clock_;
  std::function<void(const std::string&)> fail_;
  Topology topology_;
  Interconnect interconnect_;
  CollectiveRendezvous rendezvous_;
  ChunkSchedule schedule_;
  std::vector<MemberHbm> hbm_;
  NumericsWorker* numerics_ = nullptr;
  std::vector<std::unique_ptr<sc_core::sc_event>> done_events_;  // per core
  sc_core::sc_event work_;                                       // the schedule has new events
  uint64_t collectives_ = 0;
};

}  // namespace tpusim::sim
