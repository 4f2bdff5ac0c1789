#pragma once
// One TPU chip: its HBM (storage and channel timing, shared by every core's DMA engines), its
// host link and its TensorCores.

#include <memory>
#include <systemc>
#include <vector>

#include "sim/chip/core.h"
#include "sim/chip/host_link.h"

namespace tpusim::sim {

class Chip : public sc_core::sc_module {
 public:
  Chip(const sc_core::sc_module_name& name, const ModelSettings& settings, ChipId chip,
       StatGroup& stats);
  // The SystemC thread processes a chip of `spec` elaborates: its cores' and its host link's
  // two (one each way).
  static uint64_t thread_processes(const config::ChipSpec& spec);

  Core& core(uint32_t core_on_chip) { return *cores_[core_on_chip]; }
  uint32_t core_count() const { return static_cast<uint32_t>(cores_.size()); }
  Memory& hbm() { return hbm_; }
  HbmTiming& hbm_timing() { return hbm_timing_; }
  HostLink& host_link() { return *host_link_; }
  // After a failed run: its cores', HBM channels' and host link's state as after construction
  // (the bytes in HBM stay).
  void abandon_run();

 private:
  StatGroup& stats_;
  Memory hbm_;
  HbmTiming hbm_timing_;
  sc_core::sc_event outfeed_pushed_;
  std::vector<std::unique_ptr<Core>> cores_;
  std::unique_ptr<HostLink> host_link_;
};

}  // namespace tpusim::sim
