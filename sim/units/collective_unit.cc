#include "sim/units/collective_unit.h"

#include <cmath>

#include "sim/isa/ops.h"
#include "traces/analysis_events.h"

namespace tpusim::sim {

CollectiveUnit::CollectiveUnit(const sc_core::sc_module_name& name, CoreContext& ctx,
                               StatGroup& stats, CollectiveEngine& engine)
    : Unit(name, ctx, stats, "collectives over the interconnect"), engine_(engine) {
  stats_.add("peer_wait_cycles", "cycles",
             "cycles a collective waited for the rest of its group to issue it",
             [this] { return static_cast<double>(peer_wait_cycles_); });
  stats_.add("collective_cycles", "cycles",
             "cycles from a collective's start (every member issued) to this core's part done",
             [this] { return static_cast<double>(collective_cycles_); });
  stats_.add("collectives", "collectives", "collectives this core took part in",
             [this] { return static_cast<double>(collectives_); });
  stats_.on_reset([this] { peer_wait_cycles_ = collective_cycles_ = collectives_ = 0; });
}

void CollectiveUnit::execute(const IssuedInstruction& item) {
  const uint64_t issued = ctx_.now_cycle();
  engine_.arrive(ctx_.core(), item.instr->collective(), item.index, issued, !ctx_.timing_only());
  while (!engine_.done(ctx_.core())) wait(engine_.done_event(ctx_.core()));
  const auto start = ceil_cycle(engine_.start_cycle(ctx_.core()));
  const auto done = std::max<uint64_t>(start + 1, ceil_cycle(engine_.finish_cycle(ctx_.core())));
  wait_until(done);
  peer_wait_cycles_ += start - issued;
  collective_cycles_ += done - start;
  busy_cycles_ += done - start;
  ++collectives_;
  if (start > issued) trace(traces::kPeerWait.data(), issued, start);
  trace(op_name(*item.instr), start, done);
  // The op's time includes waiting for its peers.
  const CollectiveEngine::MemberWork& work = engine_.work(ctx_.core());
  profile(issued, done, {work.flops, work.hbm_bytes, false, work.ici_bytes});
  ctx_.sync().complete_at(done, item.instr->signal());
}

}  // namespace tpusim::sim
