#pragma once
// The base of every unit of a core (DMA engine, MXU, vector unit, infeed, outfeed): one
// sc_module with one thread serving a bounded in-order queue. For each instruction the thread
// waits until it was issued and its sync flags hold (counted as stall cycles), then hands it to
// execute(), which computes the timing analytically, does the functional work and waits once.
// Every unit is built with the core's CoreContext (who the core is, its clock, sync flags, trace
// sink and run state); what else it touches each unit's constructor says.

#include <cstdint>
#include <deque>
#include <string>
#include <systemc>

#include "sim/stats/stat_group.h"
#include "sim/units/core_context.h"

namespace tpusim::sim {

class Unit : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Unit);
  // A unit that does the core's own work (`core_work`: DMA engines, MXUs, the vector unit)
  // reports each instruction's span to the core's busy track.
  Unit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
       std::string description, bool core_work = false);

  bool full() const { return queue_.size() >= ctx_.unit_queue_depth(); }
  void push(const IssuedInstruction& item);
  const sc_core::sc_event& space_freed() const { return space_freed_; }
  // Empty when idle or busy; otherwise what it is blocked on, for deadlock messages.
  std::string blocked_on() const;
  // After a failed run, before its thread restarts (ProcessRestart): the queue emptied and
  // nothing held of the instruction it was running.
  void abandon_run();

  uint64_t busy_cycles() const { return busy_cycles_; }
  uint64_t stall_cycles() const { return stall_cycles_; }

 protected:
  // Runs one instruction. On return the unit takes the next one; the instruction's completion
  // must have been registered with ctx_.sync().complete_at().
  virtual void execute(const IssuedInstruction& item) = 0;

  void wait_until(uint64_t cycle);
  // Reports [start, end) to the trace sink (when there is one).
  void trace(const char* what, uint64_t start, uint64_t end);
  // Adds the current instruction's work, in progress over [start, end) (until its results
  // land), to its graph op's profile, and for a core_work unit to the core's busy track.
  void profile(uint64_t start, uint64_t end, const OpWork& work = {});
  // Sets what the unit is waiting for while it blocks inside execute() ("" when done).
  void set_blocked(std::string what) { blocked_ = std::move(what); }
  // What it waits for inside execute(), for blocked_on(): what set_blocked() set, unless a unit
  // formats it only when asked.
  virtual std::string blocked_detail() const { return blocked_; }

  CoreContext& ctx_;
  StatGroup& stats_;
  const bool core_work_;
  uint64_t busy_cycles_ = 0;
  uint64_t stall_cycles_ = 0;  // waiting for sync flags
  uint64_t instructions_ = 0;
  const IssuedInstruction* current_ = nullptr;

 private:
  void thread();

  std::deque<IssuedInstruction> queue_;
  sc_core::sc_event work_;
  sc_core::sc_event space_freed_;
  traces::TrackId track_{};
  std::string blocked_;
  // Waiting for the current instruction's sync flags: blocked_on() says which, formatted only
  // when asked (a deadlock message), not on every wait.
  bool waiting_for_flags_ = false;
  // The cycle wait_until() sleeps to, while it sleeps (0 otherwise).
  uint64_t sleeping_until_ = 0;
};

}  // namespace tpusim::sim
