#pragma once
// What the units of one core share: the slice's figures, the clock, memories and their
// arbiters, sync state, feed queues, the trace sink and the run's options. Owned by the Core
// (and its Chip, for HBM); units hold a reference.

#include <array>
#include <cstdint>
#include <functional>
#include <string>

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

struct CoreContext {
  uint32_t core = 0;  // global core index
  uint32_t chip = 0;
  uint32_t core_on_chip = 0;
  const config::SliceSpec* slice = nullptr;
  const ClockDomain* clock = nullptr;
  bool timing_only = false;
  std::string mxu_policy;
  traces::Sink* sink = nullptr;  // may be null
  RateCounter hbm_bandwidth;     // the DMA engines' HBM traffic (a counter track with a sink)
  BusyTrack busy;                // where the compute units had work in progress (with a sink)
  OpProfile ops;                 // FLOPs, HBM bytes and time per graph op (the run's program)

  Memory* vmem = nullptr;
  NumericsWorker* numerics = nullptr;  // the slice's: runs the MXUs' numerics
  BandwidthServer* vmem_ports = nullptr;
  Memory* hbm = nullptr;            // the chip's
  HbmTiming* hbm_timing = nullptr;  // the chip's
  // Replica folding: the chips of the shadow cores that stand for this one (isa CoreProgram.
  // stands_for), whose HBM takes each of this core's DMA requests too. Set per run.
  std::vector<HbmTiming*> hbm_mirrors;
  // Replica folding: this run's stream is a shadow (isa CoreProgram.shadow). It traces nothing of
  // its own (no steps, spans or HBM counter: a pod's thousands of shadows would fill the trace);
  // the links it drives still count on their utilisation tracks.
  bool shadow = false;
  SyncState* sync = nullptr;
  FeedQueue* infeed = nullptr;
  FeedQueue* outfeed = nullptr;
  sc_core::sc_event* outfeed_pushed = nullptr;  // the chip's: wakes the host link

  // Highest VMEM byte any instruction touched, plus one: the VMEM high-water mark.
  uint64_t vmem_high_water = 0;
  void touch_vmem(uint64_t end) {
    if (end > vmem_high_water) vmem_high_water = end;
  }

  // The step counter the vector unit's RNG reads: the program's step_base plus the outermost
  // loop's iteration (set by the sequencer).
  uint64_t step = 0;

  LhsCache lhs_cache;
  // Every functional write into VMEM reports its byte range here (after
  // numerics->before_access).
  void note_vmem_write(uint64_t lo, uint64_t hi) {
    if (lhs_cache.valid && lo < lhs_cache.hi && lhs_cache.lo < hi) lhs_cache.valid = false;
  }

  // Runs `job`, the functional effect of one of this core's instructions, on the
  // NumericsWorker (after the core's earlier jobs); `shared` when it touches HBM. When a memory
  // has no fixed address yet (the fallback store grows), it runs here after everything posted.
  void post_numerics(bool shared, HostRange read, HostRange write, std::function<void()> job) {
    if (vmem->base_is_stable() && (!shared || hbm->base_is_stable())) {
      numerics->post(core, shared, read, write, std::move(job));
    } else {
      numerics->drain();
      job();
    }
  }

  // Waits for this core's jobs that share bytes with an access to VMEM, made here, that reads
  // the block `read` and writes `write` (either may be null).
  void before_vmem_access(const isa::Block* read, const isa::Block* write) {
    if (!numerics->may_be_busy()) return;
    const uint8_t* base = vmem->base_covering(0);
    const HostRange r = read != nullptr ? host_range(base, *read) : HostRange{};
    numerics->before_access(core, &r, 1, write != nullptr ? host_range(base, *write) : HostRange{});
  }

  // Stops the run with an error that names the core and instruction (set by the System).
  std::function<void(const std::string&)> fail;

  uint64_t now_cycle() const {
    return clock->cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
  }
};

}  // namespace tpusim::sim
