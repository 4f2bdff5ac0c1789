#pragma once
// One TensorCore: its VMEM (with the ports every unit shares), sync state, feed queues, units
// and sequencer, wired in the constructor.

#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "sim/chip/core_options.h"
#include "sim/units/collective_unit.h"
#include "sim/units/dma_engine.h"
#include "sim/units/feed_units.h"
#include "sim/units/mxu_unit.h"
#include "sim/units/sequencer.h"
#include "sim/units/vector_unit.h"

namespace tpusim::sim {

class Core : public sc_core::sc_module {
 public:
  Core(const sc_core::sc_module_name& name, const CoreOptions& options, StatGroup& stats);

  CoreContext& context() { return ctx_; }
  Sequencer& sequencer() { return *sequencer_; }
  // At the end of a run: counter tracks drop to what is left (nothing is in flight then).
  void flush_trace_counters() { ctx_.hbm_bandwidth().retire_until(UINT64_MAX); }
  Memory& vmem() { return vmem_; }
  FeedQueue& infeed() { return infeed_; }
  FeedQueue& outfeed() { return outfeed_; }
  // Every unit of the core, in the order they were built: DMA engines, MXUs, the vector unit,
  // infeed, outfeed, the collective unit (not the sequencer).
  const std::vector<std::unique_ptr<Unit>>& units() const { return units_; }
  const std::vector<MxuUnit*>& mxus() const { return mxus_; }
  InfeedUnit& infeed_unit() { return *infeed_unit_; }
  OutfeedUnit& outfeed_unit() { return *outfeed_unit_; }
  // Every unit that is blocked, one line each, for deadlock messages.
  std::vector<std::string> blocked() const;
  StatGroup& stats() { return stats_; }
  // Between runs only.
  void set_timing_only(bool timing_only) { ctx_.set_timing_only(timing_only); }
  void set_mxu_policy(const std::string& name);

 private:
  StatGroup& stats_;
  // What ctx_ wires the units to: built before it.
  Memory vmem_;
  BandwidthServer vmem_ports_;
  FeedQueue infeed_;
  FeedQueue outfeed_;
  std::unique_ptr<SyncState> sync_;
  CoreContext ctx_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<MxuUnit*> mxus_;
  InfeedUnit* infeed_unit_ = nullptr;
  OutfeedUnit* outfeed_unit_ = nullptr;
  std::unique_ptr<Sequencer> sequencer_;
};

}  // namespace tpusim::sim
