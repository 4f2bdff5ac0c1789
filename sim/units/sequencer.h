#pragma once
// The sequencer of a core: walks the core's instruction stream in order and hands each
// instruction to the queue of the unit that runs it, one per cycle, waiting only when that
// queue is full. Loops and halts are its own: a loop iteration starts once every unit is idle
// (and resets the sync flags); a halt, or the stream's end, finishes once every unit is idle.

#include <cstdint>
#include <string>
#include <systemc>
#include <vector>

#include "sim/units/core_context.h"
#include "sim/units/unit.h"

namespace tpusim::sim {

struct CoreUnits {
  std::vector<Unit*> dma;  // by engine
  std::vector<Unit*> mxu;  // by MXU index
  Unit* vector = nullptr;
  Unit* infeed = nullptr;
  Unit* outfeed = nullptr;
  Unit* collective = nullptr;
};

class Sequencer : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Sequencer);
  Sequencer(const sc_core::sc_module_name& name, CoreContext& ctx, CoreUnits units,
            StatGroup& stats);

  // Gives the sequencer a stream to run when start() is notified; null for none.
  void load(const isa::CoreProgram* program, uint64_t step_base = 0);
  void start() { start_.notify(sc_core::SC_ZERO_TIME); }
  bool running() const { return running_; }
  uint64_t start_cycle() const { return start_cycle_; }
  uint64_t end_cycle() const { return end_cycle_; }
  const sc_core::sc_event& finished() const { return finished_; }
  // What it is blocked on, for deadlock messages ("" when not blocked).
  std::string blocked_on() const;
  // After a failed run, before its thread restarts (ProcessRestart): no stream, not running.
  void abandon_run();

 private:
  void thread();
  // Runs instructions [begin, end); false when a halt ended the stream.
  bool run_range(int begin, int end);
  void drain();
  // Reports the outermost loop iteration that just drained as "step N" on the steps track, N
  // being the global step it completes (its step counter plus one).
  void trace_step();
  Unit* unit_for(const isa::Instruction& instr);

  CoreContext& ctx_;
  CoreUnits units_;
  StatGroup& stats_;
  const isa::CoreProgram* program_ = nullptr;
  uint64_t step_base_ = 0;
  int loop_depth_ = 0;
  sc_core::sc_event start_;
  sc_core::sc_event finished_;
  bool running_ = false;
  uint64_t issue_cycle_ = 0;  // the cycle the next instruction issues at
  uint64_t start_cycle_ = 0;
  uint64_t end_cycle_ = 0;
  uint64_t issued_ = 0;
  uint64_t issue_stall_cycles_ = 0;
  uint64_t loop_iterations_ = 0;
  // What the sequencer waits for, formatted only when blocked_on() is asked: the instruction
  // it cannot issue into a full queue, or (draining) the completions it waits for.
  const isa::Instruction* blocked_issue_ = nullptr;
  int blocked_index_ = 0;
  const Unit* blocked_unit_ = nullptr;
  bool draining_ = false;
  traces::TrackId steps_track_{};
  uint64_t step_start_ = 0;  // cycle the current outermost iteration began
  std::string step_name_;
};

}  // namespace tpusim::sim
