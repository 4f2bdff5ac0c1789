#include "sim/system.h"

#include <algorithm>
#include <cstdlib>
#include <systemc>
#include <utility>

#include "common/strings.h"
#include "sim/isa/stream_bodies.h"
#include "sim/isa/validator.h"
#include "sim/process_stacks.h"
#include "sim/slice_model.h"
#include "sim/timing/mxu_policy.h"

namespace tpusim::sim {

namespace {
bool g_elaborated = false;  // SystemC elaborates once per process
}

System::System(std::shared_ptr<const config::SliceSpec> slice, SystemOptions options)
    : slice_(std::move(slice)),
      options_(std::move(options)),
      core_map_(*slice_),
      clock_(slice_->chip.core.clock_hz) {}

System::~System() = default;

absl::StatusOr<std::unique_ptr<System>> System::create(
    std::shared_ptr<const config::SliceSpec> slice, SystemOptions options) {
  if (slice == nullptr) return absl::InvalidArgumentError("System::create: no slice");
  if (g_elaborated) {
    return absl::FailedPreconditionError(
        "a System was already built in this process: SystemC elaborates once per process, so build "
        "one System and drive it with programs");
  }
  // The kernel maps every thread's stack as it starts: held against the address space before
  // anything is built (a pod slice's tens of thousands of modules take seconds and hundreds of
  // MB to elaborate).
  if (auto s =
          check_thread_stacks(str_cat("slice ", slice->name), SliceModel::thread_processes(*slice));
      !s.ok()) {
    return s;
  }
  g_elaborated = true;
  // No banner on stdout: tpusim's own output (JSON) goes there.
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);

  std::unique_ptr<System> system(new System(std::move(slice), std::move(options)));
  system->stats_ = std::make_unique<StatGroup>("slice", str_cat("slice ", system->slice_->name));
  System* raw = system.get();
  system->model_ =
      std::make_unique<SliceModel>("slice", *system->slice_, system->clock_, system->options_,
                                   *system->stats_, [raw](const std::string& message) {
                                     if (raw->run_error_.empty()) raw->run_error_ = message;
                                     // Paused, not stopped: a stopped kernel never starts
                                     // again, and the System recovers from a unit's error.
                                     sc_core::sc_pause();
                                   });
  // Run the initialization phase now, so every process sits in its first wait before the first
  // run notifies it (a notification made before initialization would be lost).
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  return system;
}

void System::set_timing_only(bool timing_only) {
  model_->numerics->drain();
  options_.timing_only = timing_only;
  for (auto& chip : model_->chips) {
    for (uint32_t c = 0; c < chip->core_count(); ++c) chip->core(c).set_timing_only(timing_only);
  }
}

void System::set_mxu_policy(MxuPolicy policy) {
  options_.mxu_policy = policy;
  for (auto& chip : model_->chips) {
    for (uint32_t c = 0; c < chip->core_count(); ++c) chip->core(c).set_mxu_policy(policy);
  }
}

uint64_t System::now_cycle() const {
  return clock_.cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
}

absl::Status System::check_usable() const {
  if (!failure_.empty()) {
    return absl::FailedPreconditionError(
        str_cat("this System cannot run again after an earlier run failed (", failure_,
                "); build a new one in a new process"));
  }
  return absl::OkStatus();
}

absl::Status System::idle(uint64_t cycles) {
  if (absl::Status s = check_usable(); !s.ok()) return s;
  if (cycles == 0) return absl::OkStatus();
  const uint64_t now = sc_core::sc_time_stamp().value();
  const uint64_t until = clock_.time_of(Cycles(now_cycle() + std::min(cycles, kNeverCycle)));
  if (until > kTimeHorizonPs) {
    return absl::OutOfRangeError(str_cat("idling ", cycles, " cycles from cycle ", now_cycle(),
                                         " would pass the simulator's time horizon (",
                                         kTimeHorizonText, ")"));
  }
  if (until > now)
    sc_core::sc_start(sc_core::sc_time(static_cast<double>(until - now), sc_core::SC_PS));
  return absl::OkStatus();
}

absl::StatusOr<RunResult> System::run(const isa::Program& program) {
  if (absl::Status s = check_usable(); !s.ok()) return s;
  if (absl::Status s = validate_program(program, *slice_); !s.ok()) return s;
  program_ = &program;
  stats_->reset();
  model_->collectives->begin_run();
  const uint64_t start = now_cycle();
  Picoseconds end = kTimeHorizonPs;
  if (options_.max_run_cycles > 0 && options_.max_run_cycles < kNeverCycle - start)
    end = std::min(end, clock_.time_of(Cycles(start + options_.max_run_cycles)));
  const std::vector<const isa::CoreProgram*> bodies = stream_bodies(program);
  begin_cores(program, bodies);
  for (int i = 0; i < program.cores_size(); ++i) {
    Sequencer& seq = model_->core(CoreId{program.cores(i).core()}).sequencer();
    seq.load(bodies[static_cast<size_t>(i)], program_->step_base());
    seq.start();
  }
  try {
    // Bounded by the horizon (and max_run_cycles); returns early, as sc_start() would, when no
    // event is left.
    // Nothing pending (a program of no cores): nothing to run, and SystemC would warn (W571) on
    // stdout, which is tpusim's JSON.
    const Picoseconds now = sc_core::sc_time_stamp().value();
    if (now < end && sc_core::sc_pending_activity()) {
      sc_core::sc_start(sc_core::sc_time(static_cast<double>(end - now), sc_core::SC_PS),
                        sc_core::SC_EXIT_ON_STARVATION);
    }
  } catch (const std::exception& e) {
    model_->numerics->drain();
    failure_ = str_cat("the simulation kernel threw: ", e.what());
    return absl::InternalError(failure_);
  }
  // The last matmuls' values land before anyone reads memory or the next run starts.
  model_->numerics->drain();
  if (std::string error = model_->numerics->take_error(); !error.empty()) {
    failure_ = str_cat("the MXU numerics threw: ", error);
    return absl::InternalError(failure_);
  }
  if (!run_error_.empty())
    return recover(absl::FailedPreconditionError(std::exchange(run_error_, std::string())));
  for (uint32_t core = 0; core < core_map_.cores(); ++core)
    model_->core(CoreId{core}).flush_trace_counters();
  model_->collectives->flush_trace_counters();
  RunResult result;
  result.start_cycle = start;
  result.end_cycle = start;
  for (const auto& stream : program_->cores()) {
    Sequencer& seq = model_->core(CoreId{stream.core()}).sequencer();
    // Events are left, but none before the horizon: the run would go past it.
    if (seq.running() && sc_core::sc_pending_activity())
      return recover(absl::OutOfRangeError(horizon_diagnosis(*program_, end)));
    if (seq.running()) return recover(absl::DeadlineExceededError(deadlock_diagnosis(*program_)));
    result.cores.push_back(
        CoreRun{CoreId{stream.core()}, seq.end_cycle() - start, stream.shadow()});
    result.end_cycle = std::max(result.end_cycle, seq.end_cycle());
  }
  return result;
}

absl::Status System::recover(absl::Status failure) {
  // The diagnosis was made from the blocked units; now everything of the run is dropped.
  program_ = nullptr;
  if (absl::Status restarted = model_->abandon_run(); !restarted.ok()) {
    failure_ =
        str_cat(failure.message(), "; then restarting the System failed: ", restarted.message());
    return absl::Status(failure.code(), failure_);
  }
  set_mxu_policy(options_.mxu_policy);  // the arrays' pipelines start afresh
  ++recoveries_;
  return failure;
}

void System::begin_cores(const isa::Program& program,
                         const std::vector<const isa::CoreProgram*>& bodies) {
  // Every core starts the run afresh; a core without a stream has no ops and folds nothing.
  std::vector<CoreRunSetup> setups(core_map_.cores());
  for (int i = 0; i < program.cores_size(); ++i) {
    const isa::CoreProgram& stream = program.cores(i);
    CoreRunSetup& setup = setups[stream.core()];
    setup.shadow = stream.shadow();
    for (const isa::Origin& o : bodies[static_cast<size_t>(i)]->origins())
      setup.origins.push_back({o.label(), o.op()});
    if (!stream.shadow()) continue;
    // The shadow's chip's HBM takes each DMA request of the core it stands for.
    setups[stream.stands_for()].hbm_mirrors.push_back(
        &model_->chip(core_map_.chip_of(CoreId{stream.core()})).hbm_timing());
  }
  for (uint32_t c = 0; c < core_map_.cores(); ++c)
    model_->core(CoreId{c}).begin_run(std::move(setups[c]));
}

std::string System::horizon_diagnosis(const isa::Program& program, Picoseconds end) {
  const std::string limit =
      end < kTimeHorizonPs
          ? str_cat("the run's limit of ", options_.max_run_cycles, " cycles (max_run_cycles)")
          : str_cat("the simulator's time horizon (", kTimeHorizonText, ")");
  return str_cat("program '", program.name(), "' would run past ", limit,
                 ": nothing is left to happen before it after cycle ", now_cycle(),
                 ". A rate in the slice config is far too low for the work, or the job is far "
                 "too long. Still running:\n  ",
                 str_join(blocked_lines(program), "\n  "));
}

std::string System::deadlock_diagnosis(const isa::Program& program) {
  return str_cat("program '", program.name(), "' deadlocked at cycle ", now_cycle(),
                 ": no unit can make progress and no event is pending\n  ",
                 str_join(blocked_lines(program), "\n  "));
}

std::vector<std::string> System::blocked_lines(const isa::Program& program) {
  std::vector<std::string> lines;
  for (const auto& stream : program.cores()) {
    const CoreId id{stream.core()};
    Core& core = model_->core(id);
    if (!core.sequencer().running()) continue;
    for (const std::string& b : core.blocked())
      lines.push_back(str_cat("core ", stream.core(), ": ", b));
    const size_t pending = model_->host_link_of(id).pending_for(core_map_.core_on_chip(id));
    if (core.infeed_unit().blocked_on().size() > 0) {
      lines.push_back(str_cat("core ", stream.core(), ": the host has ", pending,
                              " infeed batch(es) pending for it"));
    }
  }
  for (size_t h = 0; h < model_->infeeds.size(); ++h) {
    const HostInfeed& infeed = *model_->infeeds[h];
    if (infeed.steps_pending() == 0 && !infeed.delivering()) continue;
    lines.push_back(str_cat(model_->infeeds.size() == 1 ? std::string("host") : str_cat("host ", h),
                            " infeed thread: ", infeed.steps_pending(), " step(s) not yet taken",
                            infeed.delivering() ? "; one step still crossing" : ""));
  }
  return lines;
}

namespace {
absl::Status range_error(const char* what, uint64_t address, uint64_t size, uint64_t capacity) {
  return absl::OutOfRangeError(str_cat(what, " access [", address, ", ", address + size,
                                       ") is outside its ", capacity, " bytes"));
}
}  // namespace

absl::Status System::write_hbm(ChipId chip, uint64_t address, const void* data, uint64_t size) {
  if (!core_map_.contains(chip)) return absl::OutOfRangeError(str_cat("no chip ", index(chip)));
  Memory& hbm = model_->chip(chip).hbm();
  if (address + size > hbm.capacity()) return range_error("HBM", address, size, hbm.capacity());
  hbm.write(address, data, size);
  return absl::OkStatus();
}

absl::Status System::read_hbm(ChipId chip, uint64_t address, void* data, uint64_t size) {
  if (!core_map_.contains(chip)) return absl::OutOfRangeError(str_cat("no chip ", index(chip)));
  Memory& hbm = model_->chip(chip).hbm();
  if (address + size > hbm.capacity()) return range_error("HBM", address, size, hbm.capacity());
  hbm.read(address, data, size);
  return absl::OkStatus();
}

absl::Status System::write_vmem(CoreId core, uint64_t address, const void* data, uint64_t size) {
  if (!core_map_.contains(core)) return absl::OutOfRangeError(str_cat("no core ", index(core)));
  CoreVmem& vmem = model_->core(core).vmem();
  if (address + size > vmem.memory().capacity())
    return range_error("VMEM", address, size, vmem.memory().capacity());
  vmem.memory().write(address, data, size);
  vmem.note_write(address, address + size);
  return absl::OkStatus();
}

absl::Status System::read_vmem(CoreId core, uint64_t address, void* data, uint64_t size) {
  if (!core_map_.contains(core)) return absl::OutOfRangeError(str_cat("no core ", index(core)));
  Memory& vmem = model_->core(core).vmem().memory();
  if (address + size > vmem.capacity()) return range_error("VMEM", address, size, vmem.capacity());
  vmem.read(address, data, size);
  return absl::OkStatus();
}

absl::Status System::send_infeed(CoreId core, FeedEntry entry, uint64_t ready_cycle) {
  if (!core_map_.contains(core)) return absl::OutOfRangeError(str_cat("no core ", index(core)));
  model_->host_link_of(core).send(core_map_.core_on_chip(core), std::move(entry), ready_cycle);
  return absl::OkStatus();
}

absl::Status System::queue_infeed_step(InfeedStep step) {
  for (const auto& [core, entry] : step.entries) {
    if (!core_map_.contains(core)) {
      return absl::OutOfRangeError(str_cat("infeed step ", step.index, ": no core ", index(core),
                                           " (", slice_->name, " has ", slice_->cores, ")"));
    }
  }
  if (step.host >= model_->infeeds.size()) {
    return absl::OutOfRangeError(str_cat("infeed step ", step.index, ": no host ", step.host, " (",
                                         slice_->name, " has ", model_->infeeds.size(), ")"));
  }
  const uint32_t host = step.host;
  model_->infeeds[host]->queue(std::move(step));
  return absl::OkStatus();
}

std::vector<FeedEntry> System::take_outfeed(CoreId core) {
  if (!core_map_.contains(core)) return {};
  return model_->host_link_of(core).take_outbox(core_map_.core_on_chip(core));
}

StatGroup& System::stats() { return *stats_; }

void System::reset_stats() { stats_->reset(); }

}  // namespace tpusim::sim

// libsystemc.so carries a main() that calls sc_main(), so the shared library needs the symbol.
// tpusim's executables have their own main() and drive SystemC through System, so this is never
// called; it is weak so that a program with its own sc_main() keeps it.
__attribute__((weak)) int sc_main(int /*argc*/, char* /*argv*/[]) { return 1; }
