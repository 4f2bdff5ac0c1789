#include "sim/units/sequencer.h"

#include "common/strings.h"
#include "sim/isa/ops.h"
#include "traces/analysis_events.h"

namespace tpusim::sim {

Sequencer::Sequencer(const sc_core::sc_module_name& name, CoreContext& ctx, CoreUnits units,
                     StatGroup& stats)
    : sc_module(name),
      ctx_(ctx),
      units_(std::move(units)),
      stats_(stats.child(basename(), "in-order issue of the core's instruction stream")) {
  SC_THREAD(thread);
  stats_.add("issued", "instructions", "instructions handed to units",
             [this] { return static_cast<double>(issued_); });
  stats_.add("issue_stall_cycles", "cycles", "cycles issue waited for room in a unit's queue",
             [this] { return static_cast<double>(issue_stall_cycles_); });
  stats_.add("loop_iterations", "iterations", "device loop iterations run",
             [this] { return static_cast<double>(loop_iterations_); });
  if (ctx_.sink() != nullptr) {
    steps_track_ = ctx_.sink()->declare_track(
        {traces::TrackInfo::Kind::kUnit, static_cast<int>(index(ctx_.chip())),
         static_cast<int>(ctx_.core_on_chip()), std::string(traces::kStepsTrack), ""});
  }
  stats_.on_reset([this] {
    issued_ = 0;
    issue_stall_cycles_ = 0;
    loop_iterations_ = 0;
  });
}

void Sequencer::load(const isa::CoreProgram* program, uint64_t step_base) {
  program_ = program;
  step_base_ = step_base;
}

void Sequencer::trace_step() {
  ctx_.busy().flush();  // the units are idle: the step's last run is complete
  // A shadow core's iterations are its collectives alone, not the step it stands for (and it
  // traces nothing of its own: CoreContext::shadow).
  if (ctx_.sink() == nullptr || !ctx_.sink()->recording() || ctx_.shadow()) return;
  // Named like TensorFlow's global_step: the step that brings it to N (step counter N - 1).
  step_name_ = str_cat("step ", ctx_.step() + 1);
  ctx_.sink()->slice(steps_track_, step_name_, ctx_.clock().time_of(Cycles(step_start_)),
                     ctx_.clock().time_of(Cycles(ctx_.now_cycle())));
}

void Sequencer::abandon_run() {
  program_ = nullptr;
  running_ = false;
  loop_depth_ = 0;
  blocked_issue_ = nullptr;
  blocked_unit_ = nullptr;
  draining_ = false;
}

std::string Sequencer::blocked_on() const {
  if (draining_) {
    return str_cat(name(), ": waits for ", ctx_.sync().outstanding(),
                   " issued instruction(s) to complete");
  }
  if (blocked_issue_ != nullptr) {
    return str_cat(name(), ": waits to issue instruction ", blocked_index_, " (",
                   op_name(*blocked_issue_), ") into the full queue of ",
                   blocked_unit_->basename());
  }
  return "";
}

Unit* Sequencer::unit_for(const isa::Instruction& instr) {
  switch (unit_of(instr)) {
    case UnitKind::kDma:
      return units_.dma[instr.dma().engine()];
    case UnitKind::kMxu:
      return units_.mxu[instr.has_matmul() ? instr.matmul().mxu() : instr.load_weights().mxu()];
    case UnitKind::kVector:
      return units_.vector;
    case UnitKind::kInfeed:
      return units_.infeed;
    case UnitKind::kOutfeed:
      return units_.outfeed;
    case UnitKind::kCollective:
      return units_.collective;
    default:
      return nullptr;
  }
}

void Sequencer::drain() {
  draining_ = true;
  while (ctx_.sync().outstanding() > 0) wait(ctx_.sync().drained());
  draining_ = false;
  issue_cycle_ = std::max(issue_cycle_, ctx_.now_cycle());
}

bool Sequencer::run_range(int begin, int end) {
  const auto& instrs = program_->instructions();
  for (int i = begin; i < end; ++i) {
    const isa::Instruction& instr = instrs[i];
    if (instr.has_halt()) return false;
    if (instr.has_loop()) {
      const int body_end = i + 1 + static_cast<int>(instr.loop().body_length());
      const bool outermost = loop_depth_ == 0;
      ++loop_depth_;
      for (uint32_t it = 0; it < instr.loop().count(); ++it) {
        drain();
        ctx_.sync().reset_flags();
        if (outermost) {
          if (it > 0) trace_step();
          ctx_.set_step(step_base_ + it);
          step_start_ = ctx_.now_cycle();
        }
        ++loop_iterations_;
        if (!run_range(i + 1, body_end)) {
          --loop_depth_;
          return false;
        }
      }
      --loop_depth_;
      drain();
      ctx_.sync().reset_flags();
      if (outermost && instr.loop().count() > 0) trace_step();
      i = body_end - 1;
      continue;
    }
    Unit* unit = unit_for(instr);
    if (unit->full()) {
      const uint64_t from = ctx_.now_cycle();
      blocked_issue_ = &instr;
      blocked_index_ = i;
      blocked_unit_ = unit;
      while (unit->full()) wait(unit->space_freed());
      blocked_issue_ = nullptr;
      issue_stall_cycles_ += ctx_.now_cycle() - from;
    }
    issue_cycle_ = std::max(issue_cycle_, ctx_.now_cycle());
    ctx_.sync().issued();
    unit->push(IssuedInstruction{&instr, i, issue_cycle_});
    ++issue_cycle_;  // one instruction issues per cycle
    ++issued_;
  }
  return true;
}

void Sequencer::thread() {
  for (;;) {
    wait(start_);
    if (program_ == nullptr) continue;
    running_ = true;
    start_cycle_ = ctx_.now_cycle();
    issue_cycle_ = start_cycle_;
    ctx_.set_step(step_base_);
    loop_depth_ = 0;
    ctx_.sync().reset_flags();
    run_range(0, program_->instructions_size());
    drain();
    ctx_.busy().flush();
    end_cycle_ = ctx_.now_cycle();
    running_ = false;
    program_ = nullptr;
    finished_.notify(sc_core::SC_ZERO_TIME);
  }
}

}  // namespace tpusim::sim
