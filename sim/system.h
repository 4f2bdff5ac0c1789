#pragma once
// The simulated slice, built once per process from a validated config and driven with
// programs. SystemC elaborates once per process, so a process builds one System; tests that
// need another config run in their own process (gtest_discover_tests does this).
//
//   auto system = System::create(slice, {.mxu_policy = MxuPolicy::kTpu});
//   (*system)->write_hbm(ChipId{0}, a_address, a.data(), a_bytes);
//   auto result = (*system)->run(program);   // validated first; cycles per core
//   (*system)->read_hbm(ChipId{0}, c_address, c.data(), c_bytes);
//
// Chips and cores are named by their strong ids (sim/ids.h); core_map() says which chip a core
// is on.
//
// A run ends when every core the program names has halted and every unit is idle. If the
// simulation runs out of events before that, the run ends with a deadlock diagnosis naming each
// blocked unit and what it waits for (DeadlineExceeded). A run that would pass the time horizon
// (kTimeHorizonPs, 53 days of simulated time) stops there with an OutOfRange error naming what
// is still running; so does one past SystemOptions::max_run_cycles. A unit's error at run time
// (an infeed entry of the wrong size, a collective's members disagreeing) stops the run with
// FailedPrecondition. After any of these the System recovers before run() returns: every queue,
// flag and reservation of the failed run is dropped and every SystemC process restarted at its
// first wait (sim/process_restart.h), so the next program runs as it would in a new process,
// from the cycle the failed one stopped at, with the bytes in HBM and VMEM as it left them.
// Only an exception out of the SystemC kernel or the numerics leaves the System unusable.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "sim/chip/infeed_step.h"
#include "sim/clock.h"
#include "sim/core_map.h"
#include "sim/ids.h"
#include "sim/isa/isa.pb.h"
#include "sim/run_report.h"
#include "sim/stats/stat_group.h"
#include "sim/timing/mxu_policy.h"
#include "sim/units/feed_queue.h"
#include "traces/sink.h"

namespace tpusim::sim {

struct SystemOptions {
  MxuPolicy mxu_policy = MxuPolicy::kTpu;
  bool timing_only = false;      // skip all functional work: no values, only time
  traces::Sink* sink = nullptr;  // receives every instruction's span per unit; may be null
  // Run the MXUs' numerics on a second host thread (NumericsWorker); the values are the same
  // either way.
  bool numerics_thread = true;
  // A run that passes this many cycles stops with OutOfRange naming the limit and what is still
  // running, as one past the time horizon does; 0: only the horizon bounds a run. For callers
  // that run programs they did not write (the program fuzzer) and want host time bounded.
  uint64_t max_run_cycles = 0;
};

struct CoreRun {
  CoreId core{};
  uint64_t cycles = 0;  // from the run's start to this core's halt
  bool shadow = false;  // ran a folded replica's collectives only (isa CoreProgram.shadow)
};

struct RunResult {
  uint64_t start_cycle = 0;
  uint64_t end_cycle = 0;  // the last core's halt
  std::vector<CoreRun> cores;
  uint64_t cycles() const { return end_cycle - start_cycle; }
};

class SliceModel;

class System {
 public:
  static absl::StatusOr<std::unique_ptr<System>> create(
      std::shared_ptr<const config::SliceSpec> slice, SystemOptions options);
  ~System();
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  const config::SliceSpec& slice() const { return *slice_; }
  const SystemOptions& options() const { return options_; }
  const ClockDomain& clock() const { return clock_; }
  // Which chip each core is on (the slice's numbering).
  const CoreMap& core_map() const { return core_map_; }
  uint64_t now_cycle() const;
  // False once the kernel or the numerics threw, or a recovery failed: every later call is
  // refused. A deadlock, a cycle cap or a unit's error leave the System usable.
  bool usable() const { return failure_.empty(); }
  // Failed runs the System recovered from since it was built.
  uint64_t recoveries() const { return recoveries_; }

  // Between runs: switch numerics off or on, or the MXU timing policy (the arrays' pipelines
  // start afresh).
  void set_timing_only(bool timing_only);
  void set_mxu_policy(MxuPolicy policy);

  // Lets `cycles` pass with the slice idle (the host's round trip between device loops).
  absl::Status idle(uint64_t cycles);

  // Validates `program` against the slice and runs it. Statistics start afresh with each run,
  // so stats() and report() describe the last run. `program` is read in place while run() runs
  // (not copied: a pod's program is hundreds of MB) and not kept after.
  absl::StatusOr<RunResult> run(const isa::Program& program);

  // Between runs: bytes [address, address + size) of a chip's HBM or a core's VMEM. OutOfRange
  // when the chip or core is not the slice's or the range passes the memory's capacity.
  absl::Status write_hbm(ChipId chip, uint64_t address, const void* data, uint64_t size);
  absl::Status read_hbm(ChipId chip, uint64_t address, void* data, uint64_t size);
  absl::Status write_vmem(CoreId core, uint64_t address, const void* data, uint64_t size);
  absl::Status read_vmem(CoreId core, uint64_t address, void* data, uint64_t size);

  // A host batch for `core`'s infeed queue, ready to cross the host link at `ready_cycle`
  // (absolute; now_cycle() or later). `entry.data` may be empty in timing-only runs.
  absl::Status send_infeed(CoreId core, FeedEntry entry, uint64_t ready_cycle);
  // A step's host batches for the infeed thread of host `step.host` (sim/chip/host_infeed.h;
  // each host has one), which takes its steps in order, each when the host has it ready and the
  // previous one is in its cores' infeed queues, and tells `step.feed` when.
  absl::Status queue_infeed_step(InfeedStep step);
  // Outfeed entries that reached the host from `core`, oldest first.
  std::vector<FeedEntry> take_outfeed(CoreId core);

  StatGroup& stats();
  void reset_stats();
  // The figures of `run`, the last run (sim/run_report.h): per core its cycles, unit and MXU
  // utilisation, feed waits, VMEM high-water mark and per-op profile; per chip its HBM bytes and
  // achieved bandwidth and its ops. report(run).to_json() for a dump.
  RunReport report(const RunResult& run);

 private:
  System(std::shared_ptr<const config::SliceSpec> slice, SystemOptions options);
  absl::Status check_usable() const;
  // Drops what the failed run left (SliceModel::abandon_run) and returns `failure`; the
  // System is unusable only if that fails.
  absl::Status recover(absl::Status failure);
  // Sets each core's part of `program` (its replica folding and op table) before it starts.
  // `bodies`: stream_bodies(program), each entry's instructions and origins.
  void begin_cores(const isa::Program& program, const std::vector<const isa::CoreProgram*>& bodies);
  std::string deadlock_diagnosis(const isa::Program& program);
  std::string horizon_diagnosis(const isa::Program& program, Picoseconds end);
  // What each still-running core's units wait for, one line each.
  std::vector<std::string> blocked_lines(const isa::Program& program);

  std::shared_ptr<const config::SliceSpec> slice_;
  SystemOptions options_;
  CoreMap core_map_;
  ClockDomain clock_;
  std::unique_ptr<StatGroup> stats_;
  std::unique_ptr<SliceModel> model_;
  // The program being run (units point into it): the caller's, alive for the whole of run(),
  // which does not copy it (a pod's program is hundreds of MB).
  const isa::Program* program_ = nullptr;
  std::string failure_;    // set when a run failed and the System is unusable
  std::string run_error_;  // set by a unit during a run
  uint64_t recoveries_ = 0;
};

}  // namespace tpusim::sim
