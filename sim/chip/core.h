#pragma once
// One TensorCore: its VMEM (with the ports every unit shares), its path to the chip's HBM, its
// lane of the numerics worker, sync state, feed queues, units and sequencer. The constructor
// wires each unit to what it uses (sim/units/core_memory.h, each unit's wiring struct) and all of
// them to the core's CoreContext.

#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "sim/chip/core_options.h"
#include "sim/units/collective_unit.h"
#include "sim/units/core_memory.h"
#include "sim/units/dma_engine.h"
#include "sim/units/feed_units.h"
#include "sim/units/mxu_unit.h"
#include "sim/units/sequencer.h"
#include "sim/units/vector_unit.h"

namespace tpusim::sim {

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

class Core : public sc_core::sc_module {
 public:
  Core(const sc_core::sc_module_name& name, const CoreOptions& options, StatGroup& stats);
  // The SystemC thread processes a core of `spec` elaborates: one per unit (its DMA engines,
  // its MXUs, the vector unit, infeed, outfeed and ICI units) and the sequencer's, as
  // build_units() makes them.
  static uint64_t thread_processes(const config::CoreSpec& spec);

  const CoreContext& context() const { return ctx_; }
  CoreVmem& vmem() { return vmem_; }
  const CoreVmem& vmem() const { return vmem_; }
  CoreHbm& hbm() { return hbm_; }
  Sequencer& sequencer() { return *sequencer_; }
  // Before the core's stream starts: the run's replica folding and op table.
  void begin_run(CoreRunSetup setup);
  // After a failed run, before its threads restart (ProcessRestart): every unit's queue, the
  // sync flags, the feed queues, the VMEM ports and the HBM mirrors as after construction.
  void abandon_run();
  // At the end of a run: counter tracks drop to what is left (nothing is in flight then).
  void flush_trace_counters() { hbm_.bandwidth().retire_until(UINT64_MAX); }
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
  void set_mxu_policy(MxuPolicy policy);

 private:
  // With a sink: the core's counter tracks (infeed queue depth, HBM bandwidth) and its busy
  // track, in that order, before the units declare theirs.
  void declare_tracks();
  // The units and the sequencer, each wired to what it uses.
  void build_units(const ModelSettings& settings);
  void add_stats();

  StatGroup& stats_;
  const config::CoreSpec& spec_;
  // What the units are wired to: built before them.
  CoreVmem vmem_;
  FeedQueue infeed_;
  FeedQueue outfeed_;
  std::unique_ptr<SyncState> sync_;
  CoreHbm hbm_;
  sc_core::sc_event& outfeed_pushed_;  // the chip's
  CoreNumerics numerics_;
  CoreContext ctx_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<MxuUnit*> mxus_;
  InfeedUnit* infeed_unit_ = nullptr;
  OutfeedUnit* outfeed_unit_ = nullptr;
  std::unique_ptr<Sequencer> sequencer_;
};

}  // namespace tpusim::sim
