#pragma once
// What every unit of one core shares, owned by the Core; each unit (and the sequencer) holds a
// reference. Only this: who the core is (its CoreId, its chip, its place on the chip), its
// clock, its sync flags, its trace sink and how to stop the run; the run's state (timing-only
// or functional, shadow or not, the step counter); and where the units' work is recorded (the
// core's busy track and op profile). What a unit works on (VMEM, the chip's HBM, the feed
// queues, the numerics worker, the collective engine) it is given in its own constructor, by
// the Core (sim/chip/core.cc): sim/units/core_memory.h and each unit's wiring struct say what.
//
// The wiring holds for the System's life: nothing rewrites it. The run's state is set through
// named methods: the numerics mode between runs (set_timing_only), the run's shadow flag and op
// table before the core's stream starts (begin_run), the step as it goes (set_step).

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/clock.h"
#include "sim/ids.h"
#include "sim/stats/busy_track.h"
#include "sim/stats/op_profile.h"
#include "sim/units/sync_state.h"
#include "traces/sink.h"

namespace tpusim::sim {

// An instruction handed to a unit: where it is in the stream and the cycle it was issued.
struct IssuedInstruction {
  const isa::Instruction* instr = nullptr;
  int index = 0;
  uint64_t issue_cycle = 0;
};

// What every unit of a core shares: every reference outlives the core's units (the Core owns
// the sync state; the System the clock, the sink and what `fail` calls).
struct CoreWiring {
  CoreId core;  // the ISA's CoreProgram.core
  ChipId chip;
  uint32_t core_on_chip;
  const ClockDomain& clock;
  traces::Sink* sink;  // receives the core's spans and counters; may be null
  SyncState& sync;
  uint32_t unit_queue_depth;  // instructions a unit's queue holds (the core's spec)
  // Stops the run with an error that names the core and instruction (set by the System).
  std::function<void(const std::string&)> fail;
};

class CoreContext {
 public:
  CoreContext(CoreWiring wiring, bool timing_only)
      : wiring_(std::move(wiring)), timing_only_(timing_only) {}
  CoreContext(const CoreContext&) = delete;
  CoreContext& operator=(const CoreContext&) = delete;

  // The wiring.
  CoreId core() const { return wiring_.core; }
  ChipId chip() const { return wiring_.chip; }
  uint32_t core_on_chip() const { return wiring_.core_on_chip; }
  const ClockDomain& clock() const { return wiring_.clock; }
  traces::Sink* sink() const { return wiring_.sink; }
  SyncState& sync() const { return wiring_.sync; }
  uint32_t unit_queue_depth() const { return wiring_.unit_queue_depth; }
  void fail(const std::string& message) const { wiring_.fail(message); }

  // Between runs: skip all functional work (no values, only time), or not.
  bool timing_only() const { return timing_only_; }
  void set_timing_only(bool timing_only) { timing_only_ = timing_only; }

  // Before the core's stream starts: whether it is a shadow (replica folding: isa
  // CoreProgram.shadow; a shadow traces nothing of its own, no steps, spans or HBM counter) and
  // its origin table (isa CoreProgram.origins) for the op profile.
  void begin_run(bool shadow, std::vector<OpFigures> origins) {
    shadow_ = shadow;
    ops_.reset(std::move(origins));
  }
  bool shadow() const { return shadow_; }
  // Outlives a run, for the collective engine, which reads it as each run goes.
  const bool& shadow_flag() const { return shadow_; }

  // The step counter the vector unit's RNG reads: the program's step_base plus the outermost
  // loop's iteration (set by the sequencer).
  uint64_t step() const { return step_; }
  void set_step(uint64_t step) { step_ = step; }

  // Where the compute units had work in progress: a busy track once the Core gives it one.
  BusyTrack& busy() { return busy_; }
  void set_busy_track(BusyTrack track) { busy_ = track; }
  OpProfile& ops() { return ops_; }  // FLOPs, HBM bytes and time per graph op of the run
  const OpProfile& ops() const { return ops_; }

  uint64_t now_cycle() const {
    return clock().cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
  }

 private:
  const CoreWiring wiring_;
  bool timing_only_;
  bool shadow_ = false;
  uint64_t step_ = 0;
  BusyTrack busy_;
  OpProfile ops_;
};

}  // namespace tpusim::sim
