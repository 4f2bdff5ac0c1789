#include "sim/units/unit.h"

#include "common/strings.h"
#include "sim/isa/ops.h"

namespace tpusim::sim {

Unit::Unit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
           std::string description, bool core_work)
    : sc_module(name),
      ctx_(ctx),
      stats_(stats.child(basename(), std::move(description))),
      core_work_(core_work) {
  SC_THREAD(thread);
  stats_.add("instructions", "instructions", "instructions this unit ran",
             [this] { return static_cast<double>(instructions_); });
  stats_.add("busy_cycles", "cycles", "cycles this unit was working",
             [this] { return static_cast<double>(busy_cycles_); });
  stats_.add("stall_cycles", "cycles", "cycles the instruction at the head waited for sync flags",
             [this] { return static_cast<double>(stall_cycles_); });
  stats_.on_reset([this] {
    busy_cycles_ = 0;
    stall_cycles_ = 0;
    instructions_ = 0;
  });
  if (ctx_.sink() != nullptr) {
    track_ = ctx_.sink()->declare_track({traces::TrackInfo::Kind::kUnit,
                                         static_cast<int>(index(ctx_.chip())),
                                         static_cast<int>(ctx_.core_on_chip()), basename(), ""});
  }
}

void Unit::push(const IssuedInstruction& item) {
  queue_.push_back(item);
  work_.notify(sc_core::SC_ZERO_TIME);
}

void Unit::abandon_run() {
  queue_.clear();
  current_ = nullptr;
  blocked_.clear();
  waiting_for_flags_ = false;
  sleeping_until_ = 0;
}

std::string Unit::blocked_on() const {
  if (current_ == nullptr) return "";
  std::string what = waiting_for_flags_ ? str_cat("waits for ", ctx_.sync().unmet(*current_->instr))
                                        : blocked_detail();
  if (what.empty() && sleeping_until_ != 0) what = str_cat("busy until cycle ", sleeping_until_);
  return str_cat(name(), " at instruction ", current_->index, " (", op_name(*current_->instr),
                 "): ", what);
}

void Unit::wait_until(uint64_t cycle) {
  const uint64_t target = ctx_.clock().time_of(Cycles(cycle));
  const uint64_t now = sc_core::sc_time_stamp().value();
  if (target <= now) return;
  sleeping_until_ = cycle;
  wait(sc_core::sc_time(static_cast<double>(target - now), sc_core::SC_PS));
  sleeping_until_ = 0;
}

void Unit::trace(const char* what, uint64_t start, uint64_t end) {
  if (ctx_.sink() == nullptr || !ctx_.sink()->recording() || ctx_.shadow()) return;
  ctx_.sink()->slice(track_, what, ctx_.clock().time_of(Cycles(start)),
                     ctx_.clock().time_of(Cycles(end)));
}

void Unit::profile(uint64_t start, uint64_t end, const OpWork& work) {
  if (current_ == nullptr) return;
  ctx_.ops().record(current_->instr->origin(), ctx_.step(), start, end, work);
  if (core_work_ && ctx_.busy().recording()) {
    ctx_.busy().add(ctx_.clock().time_of(Cycles(start)), ctx_.clock().time_of(Cycles(end)));
  }
}

void Unit::thread() {
  for (;;) {
    while (queue_.empty()) wait(work_);
    const IssuedInstruction item = queue_.front();
    current_ = &queue_.front();
    wait_until(item.issue_cycle);
    if (!ctx_.sync().satisfied(*item.instr)) {
      const uint64_t from = ctx_.now_cycle();
      waiting_for_flags_ = true;
      while (!ctx_.sync().satisfied(*item.instr)) wait(ctx_.sync().changed());
      waiting_for_flags_ = false;
      stall_cycles_ += ctx_.now_cycle() - from;
    }
    execute(item);
    ++instructions_;
    current_ = nullptr;
    queue_.pop_front();
    space_freed_.notify(sc_core::SC_ZERO_TIME);
  }
}

}  // namespace tpusim::sim
