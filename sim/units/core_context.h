#pragma once
// What the units of one core share, owned by the Core; units hold a reference.
//
// The wiring (where the core sits, the slice's figures, the clock, the trace sink, the core's
// VMEM, its ports, sync state and feed queues, its chip's HBM, HBM timing and outfeed event, the
// slice's numerics worker) is given once, in a CoreWiring, when the Core is built, and holds for
// the System's life: units read it through references and nothing rewrites it. What changes
// between runs is set through named methods: the numerics mode between runs
// (set_timing_only) and the run's replica folding and op table before the core's stream starts
// (begin_run). The rest is state the units keep as a run goes: the step counter, the VMEM
// high-water mark, the LHS cache, and the HBM bandwidth track, busy track and op profile.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "configs/slice_spec.h"
#include "sim/clock.h"
#include "sim/memory/block.h"
#include "sim/memory/memory.h"
#include "sim/stats/busy_track.h"
#include "sim/stats/op_profile.h"
#include "sim/stats/rate_counter.h"
#include "sim/timing/bandwidth_server.h"
#include "sim/timing/hbm_timing.h"
#include "sim/units/feed_queue.h"
#include "sim/units/numerics_worker.h"
#include "sim/units/sync_state.h"
#include "traces/sink.h"

namespace tpusim::sim {

// An instruction handed to a unit: where it is in the stream and the cycle it was issued.
struct IssuedInstruction {
  const isa::Instruction* instr = nullptr;
  int index = 0;
  uint64_t issue_cycle = 0;
};

// The last LHS block the core's MXUs rounded to bf16 terms. A lowered GEMM streams the same A
// block through several weight tiles (and MXUs); rounding it once saves most of the numerics'
// overhead. Any VMEM write that overlaps the block invalidates it. The simulation thread decides
// hits and misses when a matmul issues (valid, block, terms, lo, hi); the terms themselves are
// filled and read by the matmul's job on the NumericsWorker.
struct LhsCache {
  bool valid = false;
  isa::Block block;
  int terms = 0;  // bf16 terms held (1 for DEFAULT, 2 for HIGH, 3 for HIGHEST)
  uint64_t lo = 0, hi = 0;
  std::array<MatrixF, 3> parts;
};

// A core's wiring: every reference outlives the core's units (the Core owns the VMEM, its
// ports, the sync state and the feed queues; its Chip the HBM, its timing and the outfeed event;
// the SliceModel the numerics worker).
struct CoreWiring {
  uint32_t core;  // global core index (the ISA's CoreProgram.core)
  uint32_t chip;
  uint32_t core_on_chip;
  const config::SliceSpec& slice;
  const ClockDomain& clock;
  traces::Sink* sink;  // receives the core's spans and counters; may be null
  Memory& vmem;
  BandwidthServer& vmem_ports;
  NumericsWorker& numerics;  // the slice's: runs the MXUs' numerics
  Memory& hbm;               // the chip's
  HbmTiming& hbm_timing;     // the chip's
  SyncState& sync;
  FeedQueue& infeed;
  FeedQueue& outfeed;
  sc_core::sc_event& outfeed_pushed;  // the chip's: wakes the host link
  // Stops the run with an error that names the core and instruction (set by the System).
  std::function<void(const std::string&)> fail;
};

// What a run asks of one core, set before its stream starts (System::run).
struct CoreRunSetup {
  // Replica folding: this run's stream is a shadow (isa CoreProgram.shadow). It traces nothing
  // of its own (no steps, spans or HBM counter: a pod's thousands of shadows would fill the
  // trace); the links it drives still count on their utilisation tracks.
  bool shadow = false;
  // Replica folding: the HBM timing of the chips of the shadow cores that stand for this one
  // (isa CoreProgram.stands_for), which takes each of this core's DMA requests too.
  std::vector<HbmTiming*> hbm_mirrors;
  // The stream's origin table (isa CoreProgram.origins) for the op profile; empty when the
  // program has no stream for the core.
  std::vector<OpFigures> origins;
};

class CoreContext {
 public:
  // With a sink, declares the core's counter tracks (infeed queue depth, HBM bandwidth) and its
  // busy track, in that order.
  CoreContext(CoreWiring wiring, bool timing_only);
  CoreContext(const CoreContext&) = delete;
  CoreContext& operator=(const CoreContext&) = delete;

  // The wiring.
  uint32_t core() const { return wiring_.core; }
  uint32_t chip() const { return wiring_.chip; }
  uint32_t core_on_chip() const { return wiring_.core_on_chip; }
  const config::SliceSpec& slice() const { return wiring_.slice; }
  const ClockDomain& clock() const { return wiring_.clock; }
  traces::Sink* sink() const { return wiring_.sink; }
  Memory& vmem() const { return wiring_.vmem; }
  BandwidthServer& vmem_ports() const { return wiring_.vmem_ports; }
  Memory& hbm() const { return wiring_.hbm; }
  HbmTiming& hbm_timing() const { return wiring_.hbm_timing; }
  SyncState& sync() const { return wiring_.sync; }
  FeedQueue& infeed() const { return wiring_.infeed; }
  FeedQueue& outfeed() const { return wiring_.outfeed; }
  sc_core::sc_event& outfeed_pushed() const { return wiring_.outfeed_pushed; }
  void fail(const std::string& message) const { wiring_.fail(message); }

  // Between runs: skip all functional work (no values, only time), or not.
  bool timing_only() const { return timing_only_; }
  void set_timing_only(bool timing_only) { timing_only_ = timing_only; }

  // Before the core's stream starts: the run's replica folding and op table.
  void begin_run(CoreRunSetup setup);
  bool shadow() const { return shadow_; }
  // Outlives a run, for the collective engine, which reads it as each run goes.
  const bool& shadow_flag() const { return shadow_; }
  const std::vector<HbmTiming*>& hbm_mirrors() const { return hbm_mirrors_; }

  // The step counter the vector unit's RNG reads: the program's step_base plus the outermost
  // loop's iteration (set by the sequencer).
  uint64_t step() const { return step_; }
  void set_step(uint64_t step) { step_ = step; }

  // Highest VMEM byte any instruction touched, plus one: the VMEM high-water mark.
  uint64_t vmem_high_water() const { return vmem_high_water_; }
  void touch_vmem(uint64_t end) {
    if (end > vmem_high_water_) vmem_high_water_ = end;
  }
  void reset_vmem_high_water() { vmem_high_water_ = 0; }

  RateCounter& hbm_bandwidth() { return hbm_bandwidth_; }  // the DMA engines' HBM traffic
  BusyTrack& busy() { return busy_; }  // where the compute units had work in progress
  OpProfile& ops() { return ops_; }    // FLOPs, HBM bytes and time per graph op of the run
  const OpProfile& ops() const { return ops_; }
  LhsCache& lhs_cache() { return lhs_cache_; }

  // Every functional write into VMEM reports its byte range here (after
  // numerics().before_access).
  void note_vmem_write(uint64_t lo, uint64_t hi) {
    if (lhs_cache_.valid && lo < lhs_cache_.hi && lhs_cache_.lo < hi) lhs_cache_.valid = false;
  }
  // Runs `job`, the functional effect of one of this core's instructions, on the
  // NumericsWorker (after the core's earlier jobs); `shared` when it touches HBM. When a memory
  // has no fixed address yet (the fallback store grows), it runs here after everything posted.
  void post_numerics(bool shared, HostRange read, HostRange write, std::function<void()> job);
  // Waits for this core's jobs that share bytes with an access to VMEM, made here, that reads
  // the block `read` and writes `write` (either may be null).
  void before_vmem_access(const isa::Block* read, const isa::Block* write);

  uint64_t now_cycle() const {
    return clock().cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
  }

 private:
  const CoreWiring wiring_;
  bool timing_only_;
  bool shadow_ = false;
  std::vector<HbmTiming*> hbm_mirrors_;
  uint64_t step_ = 0;
  uint64_t vmem_high_water_ = 0;
  RateCounter hbm_bandwidth_;  // a counter track with a sink
  BusyTrack busy_;             // a busy track with a sink
  OpProfile ops_;
  LhsCache lhs_cache_;
};

}  // namespace tpusim::sim
