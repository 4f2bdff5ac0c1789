#pragma once
// What a core's units read and write, each given only to the units that use it (the Core wires
// them, sim/chip/core.cc):
//
// - CoreVmem: the core's VMEM, the ports every unit that moves VMEM bytes shares, the VMEM
//   high-water mark and the LHS cache, which any VMEM write invalidates (note_write).
// - CoreHbm: the core's path to its chip's HBM (storage and channel arbiters, shared with the
//   chip's other cores), the run's HBM mirrors (replica folding) and the core's HBM bandwidth
//   counter track. The DMA engines use it; so does the collective engine.
// - CoreNumerics: the core's lane of the slice's NumericsWorker, where units post the
//   functional work of their instructions.
//
// The numerics ordering contract (numerics_worker.h): a unit that writes VMEM reports the range
// with CoreVmem::note_write before it posts the job that writes it (CoreNumerics::post); a unit
// that touches VMEM on the simulation thread first waits for the core's jobs that share bytes
// with it (CoreNumerics::before_vmem_access).

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/ids.h"
#include "sim/memory/block.h"
#include "sim/memory/memory.h"
#include "sim/stats/rate_counter.h"
#include "sim/timing/bandwidth_server.h"
#include "sim/timing/hbm_timing.h"
#include "sim/units/numerics_worker.h"

namespace tpusim::sim {

// The last LHS block the core's MXUs rounded to bf16 terms. A lowered GEMM streams the same A
// block through several weight tiles (and MXUs); rounding it once saves most of the numerics'
// overhead. Any VMEM write that overlaps the block invalidates it. The simulation thread decides
// hits and misses when a matmul issues (valid, block, terms, lo, hi); the terms themselves are
// filled and read by the matmul's job on the NumericsWorker.
struct LhsCache {
  bool valid = false;
  isa::Block block;
  int terms = 0;  // bf16 terms held (1 for DEFAULT, 2 for HIGH, 3 for HIGHEST)
  uint64_t lo = 0, hi = 0;
  std::array<MatrixF, 3> parts;
};

class CoreVmem {
 public:
  CoreVmem(std::string name, uint64_t bytes, double port_bytes_per_cycle)
      : memory_(std::move(name), bytes), ports_(port_bytes_per_cycle) {}

  Memory& memory() { return memory_; }
  const Memory& memory() const { return memory_; }
  BandwidthServer& ports() { return ports_; }
  const BandwidthServer& ports() const { return ports_; }

  // Highest VMEM byte any instruction touched, plus one: the VMEM high-water mark.
  uint64_t high_water() const { return high_water_; }
  void touch(uint64_t end) {
    if (end > high_water_) high_water_ = end;
  }
  void reset_high_water() { high_water_ = 0; }
  // After a failed run: the ports free and the LHS cache empty, as after construction (the
  // bytes in VMEM stay).
  void abandon_run() {
    ports_.forget_reservations();
    lhs_cache_.valid = false;
  }

  LhsCache& lhs_cache() { return lhs_cache_; }
  // Every functional write into VMEM reports its byte range here (before the job that writes
  // it is posted, or after CoreNumerics::before_vmem_access for a write made here).
  void note_write(uint64_t lo, uint64_t hi) {
    if (lhs_cache_.valid && lo < lhs_cache_.hi && lhs_cache_.lo < hi) lhs_cache_.valid = false;
  }

 private:
  Memory memory_;
  BandwidthServer ports_;
  uint64_t high_water_ = 0;
  LhsCache lhs_cache_;
};

class CoreHbm {
 public:
  // The chip's HBM storage and channel timing: both outlive the core.
  CoreHbm(Memory& memory, HbmTiming& timing) : memory_(memory), timing_(timing) {}

  Memory& memory() const { return memory_; }
  HbmTiming& timing() const { return timing_; }

  // Replica folding: the HBM timing of the chips of the shadow cores that stand for this one
  // (isa CoreProgram.stands_for), which takes each of this core's DMA requests too. Set before
  // each run.
  void set_mirrors(std::vector<HbmTiming*> mirrors) { mirrors_ = std::move(mirrors); }
  const std::vector<HbmTiming*>& mirrors() const { return mirrors_; }
  // A DMA request of `bytes` at `address` asked at `cycle`, on the chip's channels and each
  // mirror's; returns the cycle its last byte has moved on the chip's.
  double transfer(double cycle, uint64_t address, uint64_t bytes) {
    const double end = timing_.transfer(cycle, address, bytes);
    for (HbmTiming* mirror : mirrors_) mirror->transfer(cycle, address, bytes);
    return end;
  }

  // The core's HBM traffic (its DMA engines' and its collectives'): a counter track once the
  // Core gives it one.
  RateCounter& bandwidth() { return bandwidth_; }
  void set_bandwidth_track(RateCounter counter) { bandwidth_ = std::move(counter); }

 private:
  Memory& memory_;
  HbmTiming& timing_;
  std::vector<HbmTiming*> mirrors_;
  RateCounter bandwidth_;
};

class CoreNumerics {
 public:
  // The slice's worker; the core's VMEM and its chip's HBM, whose bases the jobs use.
  CoreNumerics(NumericsWorker& worker, CoreId core, Memory& vmem, const Memory& hbm)
      : worker_(worker), core_(core), vmem_(vmem), hbm_(hbm) {}

  // Runs `job`, the functional effect of one of this core's instructions, on the
  // NumericsWorker (after the core's earlier jobs); `shared` when it touches HBM. When a memory
  // has no fixed address yet (the fallback store grows), it runs here after everything posted.
  void post(bool shared, HostRange read, HostRange write, std::function<void()> job);
  // Waits for this core's jobs that share bytes with an access to VMEM, made here, that reads
  // the block `read` and writes `write` (either may be null).
  void before_vmem_access(const isa::Block* read, const isa::Block* write);

 private:
  NumericsWorker& worker_;
  const CoreId core_;
  Memory& vmem_;
  const Memory& hbm_;
};

}  // namespace tpusim::sim
