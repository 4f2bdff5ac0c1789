#pragma once
// The core's side of the interconnect: runs Collective instructions. It hands each to the
// slice's collective engine (sim/net/collective_engine.h), waits while the rest of the group has
// not issued theirs (counted as waiting for peers) and until its own part is done (counted as
// collective time), then completes the instruction.

#include "sim/net/collective_engine.h"
#include "sim/units/unit.h"

namespace tpusim::sim {

class CollectiveUnit final : public Unit {
 public:
  CollectiveUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
                 CollectiveEngine& engine);
  uint64_t peer_wait_cycles() const { return peer_wait_cycles_; }
  uint64_t collective_cycles() const { return collective_cycles_; }

 private:
  void execute(const IssuedInstruction& item) override;
  std::string blocked_detail() const override { return engine_.waiting_for(ctx_.core()); }
  CollectiveEngine& engine_;
  uint64_t peer_wait_cycles_ = 0;
  uint64_t collective_cycles_ = 0;
  uint64_t collectives_ = 0;
};

}  // namespace tpusim::sim
