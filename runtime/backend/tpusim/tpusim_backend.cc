#include "runtime/backend/tpusim/tpusim_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/shadow_program.h"
#include "sim/isa/ops.h"
#include "sim/numerics/bf16.h"
#include "sim/system.h"
#include "traces/analysis_events.h"

namespace tpusim::runtime {
namespace {

using tpusim_backend::CompiledStep;
using tpusim_backend::ShadowProgram;
using tpusim_backend::Transfer;

// The process's System (SystemC elaborates once).
absl::StatusOr<sim::System*> shared_system(const std::string& slice_name) {
  static std::unique_ptr<sim::System> system;
  static std::string built_for;
  if (system != nullptr) {
    if (built_for != slice_name) {
      return absl::FailedPreconditionError(str_cat(
          "the tpusim backend of this process simulates ", built_for,
          "; SystemC elaborates once per process, so ", slice_name, " needs a process of its own"));
    }
    return system.get();
  }
  auto slice = config::load_slice(slice_name);
  if (!slice.ok()) return slice.status();
  sim::SystemOptions options;
  options.sink = &device_trace_router();
  // TPUSIM_NUMERICS_THREAD=0 keeps the numerics on the simulation thread: the same values, one
  // host thread (for checking exactly that, and for profiling).
  if (const char* v = std::getenv("TPUSIM_NUMERICS_THREAD"); v != nullptr && std::string(v) == "0")
    options.numerics_thread = false;
  auto made = sim::System::create(*slice, options);
  if (!made.ok()) return made.status();
  system = *std::move(made);
  built_for = slice_name;
  return system.get();
}

// The step compiled for each core position of a chip (their HBM shares differ), and the program
// that runs one replica per core: the step on the simulated replicas' cores, its shadow
// (shadow_program.h) on the folded replicas'.
class TpusimExecutable final : public Executable {
 public:
  TpusimExecutable(Graph graph, std::vector<CompiledStep> per_position,
                   std::vector<ShadowProgram> shadows, uint32_t replicas, uint32_t simulated)
      : graph_(std::move(graph)),
        per_position_(std::move(per_position)),
        shadows_(std::move(shadows)),
        replicas_(replicas),
        simulated_(simulated) {
    program_->set_name("step");
    const auto positions = static_cast<uint32_t>(per_position_.size());
    for (uint32_t r = 0; r < replicas_; ++r) {
      isa::CoreProgram* core = r < simulated_ && r < positions ? nullptr : program_->add_cores();
      // The first replica at each core position holds its position's step; the others, on
      // other chips, run the same instructions (CoreProgram::instructions_from).
      if (r >= simulated_) {
        *core = shadow_for(r).program;
        core->set_stands_for(r % simulated_);
      } else if (r >= positions) {
        core->set_instructions_from(r % positions);
      } else {
        core = take_core(per_position_[r].program);
      }
      core->set_core(r);
    }
  }
  const Graph& graph() const override { return graph_; }
  uint32_t replicas() const override { return replicas_; }
  uint32_t simulated_replicas() const override { return simulated_; }
  // Replica r runs on core r.
  const CompiledStep& step_for(uint32_t replica) const {
    return per_position_[replica % per_position_.size()];
  }
  // The device loop of replica r's program (-1: a shadow without one).
  int loop_instruction(uint32_t replica) const {
    return replica < simulated_ ? step_for(replica).loop_instruction
                                : shadow_for(replica).loop_instruction;
  }
  isa::Program& program() { return *program_; }

 private:
  // The compiled step's core, moved into the program without a copy (a ResNet-50 step at 128
  // images a core is 2.2 M instructions, 0.85 GB): its messages stay on the compiled step's
  // arena, which per_position_ keeps as long as the program, and the step is left without it.
  isa::CoreProgram* take_core(isa::ArenaProgram& step) {
    isa::CoreProgram* core = step->mutable_cores()->UnsafeArenaReleaseLast();
    program_->mutable_cores()->UnsafeArenaAddAllocated(core);
    return core;
  }

  const ShadowProgram& shadow_for(uint32_t replica) const {
    return shadows_[replica % shadows_.size()];
  }

  Graph graph_;
  std::vector<CompiledStep> per_position_;
  std::vector<ShadowProgram> shadows_;  // per position; empty unless folded
  uint32_t replicas_;
  uint32_t simulated_;
  isa::ArenaProgram program_;  // every replica's copy of its position's program
};

std::vector<uint8_t> bytes_of(const HostTensor& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.elements()) * 4);
  if (t.dtype == DType::kS32) {
    std::memcpy(out.data(), t.i.data(), out.size());
  } else {
    std::memcpy(out.data(), t.f.data(), out.size());
  }
  return out;
}

void copy_into(HostTensor& t, const std::vector<uint8_t>& data) {
  if (t.dtype == DType::kS32) {
    std::memcpy(t.i.data(), data.data(), t.i.size() * 4);
  } else {
    std::memcpy(t.f.data(), data.data(), t.f.size() * 4);
  }
}

// Persistent state of one replica into its core's HBM share: constants, then variables.
absl::Status write_state(sim::System& system, const Graph& g, const CompiledStep& step,
                         sim::ChipId chip, const Variables& variables) {
  for (const auto& [address, values] : step.constants) {
    if (auto st = system.write_hbm(chip, address, values.data(), values.size() * 4); !st.ok())
      return st;
  }
  for (int id : g.variables()) {
    const std::vector<uint8_t> data = bytes_of(variables.at(g.node(id).attrs.name));
    if (auto st = system.write_hbm(chip, step.plan.address[static_cast<size_t>(id)], data.data(),
                                   data.size());
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

// What the host link carries for an infeed: 4-byte f32 or s32, or bf16 (the values rounded to
// nearest even, as a host cast to bfloat16 does) for a 2-byte transfer.
std::vector<uint8_t> link_bytes_of(const Transfer& t, const HostTensor& value) {
  if (t.link_bytes == 4) return bytes_of(value);
  std::vector<uint8_t> out(value.f.size() * 2);
  for (size_t i = 0; i < value.f.size(); ++i) {
    const uint16_t bits = sim::f32_to_bf16_bits(value.f[i]);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

// A step's batch for one replica, cut into the entries its infeed dequeues take. Timing only,
// the entries carry their sizes and no data: nothing reads it (v4-128's 128 replicas of 128
// images held 250 MB of copies of it).
void add_batch(sim::CoreId core, const CompiledStep& step, const Feeds& feeds, bool timing_only,
               sim::InfeedStep& into) {
  for (const Transfer& t : step.infeeds) {
    const HostTensor& value = feeds.at(t.name);
    const std::vector<uint8_t> data =
        timing_only ? std::vector<uint8_t>{} : link_bytes_of(t, value);
    const uint64_t total = static_cast<uint64_t>(value.elements()) * t.link_bytes;
    const uint64_t entry_bytes = t.entry_bytes();
    for (uint64_t at = 0; at < total; at += entry_bytes) {
      sim::FeedEntry entry;
      entry.bytes = std::min<uint64_t>(entry_bytes, total - at);
      if (!timing_only) {
        entry.data.assign(data.begin() + static_cast<long>(at),
                          data.begin() + static_cast<long>(at + entry.bytes));
      }
      into.entries.emplace_back(core, std::move(entry));
    }
  }
}

// A host schedule (or, `host` >= 0, one host's part of it) as the simulator's HostFeed: device
// seconds are cycles / clock frequency.
class ScheduleFeed final : public sim::HostFeed {
 public:
  ScheduleFeed(std::shared_ptr<HostSchedule> schedule, int host, const sim::ClockDomain& clock)
      : schedule_(std::move(schedule)), host_(host), clock_(clock) {}
  uint64_t ready_cycle(uint64_t step) override {
    const double s = host_ < 0 ? schedule_->ready_seconds(step)
                               : schedule_->host_ready_seconds(step, static_cast<uint32_t>(host_));
    return clock_.cycles_for_seconds(std::max(0.0, s)).value;
  }
  void taken(uint64_t step, uint64_t cycle) override {
    const double s = static_cast<double>(cycle) / clock_.frequency_hz();
    if (host_ < 0) {
      schedule_->taken(step, s);
    } else {
      schedule_->host_taken(step, static_cast<uint32_t>(host_), s);
    }
  }

 private:
  std::shared_ptr<HostSchedule> schedule_;
  int host_;
  const sim::ClockDomain& clock_;
};

// Outfeed entries come back in program order: step by step, output by output.
absl::StatusOr<std::vector<Outputs>> receive_outputs(std::vector<sim::FeedEntry> entries,
                                                     const CompiledStep& step, size_t steps) {
  size_t next = 0;
  std::vector<Outputs> results;
  for (size_t s = 0; s < steps; ++s) {
    Outputs outputs;
    for (const Transfer& t : step.outputs) {
      HostTensor value = HostTensor::zeros(t.dtype, t.shape);
      std::vector<uint8_t> data;
      const uint64_t total = static_cast<uint64_t>(t.shape.elements()) * 4;
      uint64_t received = 0;
      while (received < total) {
        if (next >= entries.size())
          return absl::InternalError("tpusim backend: the outfeed ended early");
        // Timing-only runs send entries of the right size without data: the value stays zero.
        data.insert(data.end(), entries[next].data.begin(), entries[next].data.end());
        received += entries[next].bytes;
        ++next;
      }
      if (data.size() == total) copy_into(value, data);
      outputs[t.name] = std::move(value);
    }
    results.push_back(std::move(outputs));
  }
  return results;
}

class TpusimBackend final : public Backend {
 public:
  explicit TpusimBackend(std::string slice) : slice_(std::move(slice)) {}
  const BackendDeclaration& declaration() const override { return tpusim_backend_declaration(); }

  absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                      const CompileOptions& options) override {
    if (absl::Status st = check_backend_options(declaration(), options); !st.ok()) return st;
    auto system = shared_system(slice_);
    if (!system.ok()) return system.status();
    const config::SliceSpec& slice = (*system)->slice();
    if (options.replicas > slice.cores) {
      return absl::InvalidArgumentError(str_cat("tpusim backend: ", options.replicas,
                                                " replicas on ", slice.name, ", which has ",
                                                slice.cores, " cores (one replica per core)"));
    }
    const tpusim_backend::StepOptions step_options = tpusim_backend::step_options_from(options);
    const bool whole_slice = step_options.allreduce == isa::Collective::TORUS_2D ||
                             step_options.allreduce == isa::Collective::TORUS;
    if (whole_slice && options.replicas != slice.cores) {
      return absl::InvalidArgumentError(
          str_cat("tpusim backend: allreduce '", options.allreduce, "' runs over every core of ",
                  slice.name, " (", slice.cores, "), but the step has ", options.replicas,
                  " replica(s): use ring or bidir_ring, or one replica per core"));
    }
    // One compiled step per core position on a chip: replica r runs core r's, and every core at
    // the same position has the same HBM share.
    const sim::CoreMap cores(slice);
    std::vector<CompiledStep> per_position;
    for (uint32_t core = 0; core < std::min(options.replicas, cores.cores_per_chip()); ++core) {
      auto step = tpusim_backend::compile_graph(graph, slice, core, step_options);
      if (!step.ok()) return step.status();
      per_position.push_back(*std::move(step));
    }
    const uint32_t simulated =
        options.simulated_replicas == 0 ? options.replicas : options.simulated_replicas;
    // A shadow stands for the simulated replica at its own core position (r mod simulated), so
    // the simulated replicas fill whole chips.
    if (simulated < options.replicas && cores.core_on_chip(sim::CoreId{simulated}) != 0) {
      return absl::InvalidArgumentError(
          str_cat("tpusim backend: ", simulated, " simulated replicas of ", options.replicas,
                  " do not fill whole chips of ", cores.cores_per_chip(), " cores"));
    }
    std::vector<ShadowProgram> shadows;
    for (const CompiledStep& step : per_position) {
      if (simulated == options.replicas) break;  // nothing folded
      auto shadow = tpusim_backend::shadow_program(step.program->cores(0), step.loop_instruction);
      if (!shadow.ok()) return shadow.status();
      shadows.push_back(*std::move(shadow));
    }
    return std::make_unique<TpusimExecutable>(graph, std::move(per_position), std::move(shadows),
                                              options.replicas, simulated);
  }

  absl::StatusOr<LoopResult> run_loop(Executable& executable, Variables& variables,
                                      const std::vector<LoopStep>& steps,
                                      uint64_t first_step) override {
    auto& exe = static_cast<TpusimExecutable&>(executable);
    const Graph& g = exe.graph();
    auto system_or = shared_system(slice_);
    if (!system_or.ok()) return system_or.status();
    sim::System& system = **system_or;
    if (steps.empty()) return LoopResult{};
    if (absl::Status st = check_loop(exe, variables, steps, first_step); !st.ok()) return st;
    const uint32_t simulated = exe.simulated_replicas();
    if (simulated < exe.replicas() && !timing_only_) {
      return absl::FailedPreconditionError(
          str_cat("tpusim backend: replica folding (", simulated, " of ", exe.replicas(),
                  " replicas simulated) runs timing-only: the folded replicas compute no values"));
    }
    // Replica r runs on core r. A timing-only run computes no values, so its state is not
    // written: the pages of every replica's variables and slots (4 GB a replica for BERT-Large
    // with LAMB) stay untouched on the host.
    const sim::CoreMap& cores = system.core_map();
    for (uint32_t r = 0; r < simulated; ++r) {
      const sim::ChipId chip = cores.chip_of(sim::CoreId{r});
      if (!timing_only_) {
        if (auto st = write_state(system, g, exe.step_for(r), chip, variables); !st.ok()) return st;
      }
    }
    // Every step's batches go to the hosts' infeed threads, which take each when the host's
    // schedule says it is ready and tell the schedule when they took it. A schedule split by
    // host (each host's pipelines feed its own chips) gives each host's thread its own part.
    const uint64_t start = system.now_cycle();
    auto host_of_replica = [&cores](uint32_t r) {
      return cores.host_of(cores.chip_of(sim::CoreId{r}));
    };
    const uint32_t replica_hosts = host_of_replica(simulated - 1) + 1;
    std::vector<std::shared_ptr<sim::HostFeed>> feeds;
    const HostSchedule* feeds_of = nullptr;
    for (const LoopStep& step : steps) {
      const bool by_host =
          step.host != nullptr && step.host->hosts() > 1 && step.host->hosts() == replica_hosts;
      const uint32_t parts = by_host ? replica_hosts : 1;
      if (step.host != nullptr && (step.host.get() != feeds_of || feeds.size() != parts)) {
        feeds.clear();
        for (uint32_t h = 0; h < parts; ++h) {
          feeds.push_back(std::make_shared<ScheduleFeed>(
              step.host, by_host ? static_cast<int>(h) : -1, system.clock()));
        }
        feeds_of = step.host.get();
      }
      std::vector<sim::InfeedStep> in(parts);
      for (uint32_t h = 0; h < parts; ++h) {
        in[h].ready_cycle = start;
        in[h].host = h;
        if (step.host != nullptr) {
          in[h].feed = feeds[h];
          in[h].index = step.host_step;
        }
      }
      for (uint32_t r = 0; r < simulated; ++r) {
        const uint32_t h = by_host ? host_of_replica(r) : 0;
        add_batch(sim::CoreId{r}, exe.step_for(r), step.replicas[r], timing_only_, in[h]);
      }
      for (sim::InfeedStep& part : in) {
        if (auto st = system.queue_infeed_step(std::move(part)); !st.ok()) return st;
      }
    }
    isa::Program& program = exe.program();
    program.set_step_base(first_step);
    for (uint32_t r = 0; r < exe.replicas(); ++r) {
      const int loop = exe.loop_instruction(r);
      if (loop < 0 || program.cores(static_cast<int>(r)).has_instructions_from()) continue;
      program.mutable_cores(static_cast<int>(r))
          ->mutable_instructions(loop)
          ->mutable_loop()
          ->set_count(static_cast<uint32_t>(steps.size()));
    }
    system.set_timing_only(timing_only_);
    auto run = system.run(program);
    if (!run.ok()) return run.status();
    LoopResult result;
    result.outputs.resize(steps.size());
    for (uint32_t r = 0; r < simulated; ++r) {
      auto outputs =
          receive_outputs(system.take_outfeed(sim::CoreId{r}), exe.step_for(r), steps.size());
      if (!outputs.ok()) return outputs.status();
      for (size_t s = 0; s < steps.size(); ++s) result.outputs[s].push_back((*outputs)[s]);
    }
    // Replica 0's variables are the result (unchanged when timing only).
    const CompiledStep& first = exe.step_for(0);
    for (int id : timing_only_ ? std::vector<int>{} : g.variables()) {
      HostTensor& v = variables[g.node(id).attrs.name];
      std::vector<uint8_t> data(static_cast<size_t>(v.elements()) * 4);
      if (auto st = system.read_hbm(sim::ChipId{0}, first.plan.address[static_cast<size_t>(id)],
                                    data.data(), data.size());
          !st.ok()) {
        return st;
      }
      copy_into(v, data);
    }
    result.timing = timing_of(system, *run);
    return result;
  }

  absl::Status host_round_trip(double seconds) override {
    auto system = shared_system(slice_);
    if (!system.ok()) return system.status();
    const sim::ClockDomain& clock = (*system)->clock();
    const uint64_t cycles = clock.cycles_for_seconds(std::max(0.0, seconds)).value;
    traces::TraceRouter& router = device_trace_router();
    if (router.attached() && cycles > 0) {
      if (!host_loop_track_) {
        host_loop_track_ = router.declare_track(
            {traces::TrackInfo::Kind::kHost, -1, -1, std::string(traces::kHostLoopTrack), ""});
      }
      const uint64_t now = (*system)->now_cycle();
      router.slice(*host_loop_track_, "host round trip", clock.time_of(sim::Cycles(now)),
                   clock.time_of(sim::Cycles(now + cycles)));
    }
    return (*system)->idle(cycles);
  }

  absl::Status set_timing_only(bool timing_only) override {
    timing_only_ = timing_only;
    return absl::OkStatus();
  }

  double device_now_seconds() const override {
    auto system = shared_system(slice_);
    if (!system.ok()) return 0;
    return static_cast<double>((*system)->now_cycle()) / (*system)->clock().frequency_hz();
  }

 private:
  static DeviceTiming timing_of(sim::System& system, const sim::RunResult& run) {
    DeviceTiming t;
    t.simulated = true;
    t.cycles = run.cycles();
    t.seconds = static_cast<double>(t.cycles) / system.clock().frequency_hz();
    const sim::RunReport report = system.report(run);
    const config::SliceSpec& slice = system.slice();
    const double hz = system.clock().frequency_hz();
    for (const sim::CoreReport& core : report.cores) {
      if (core.shadow) continue;
      t.infeed_wait_cycles.push_back(core.infeed_wait_cycles);
      t.mxu_utilization.push_back(core.mxu_utilization);
    }
    // Chip 0's ops: its cores' work, each op's time the union of its spans on the chip's cores
    // (sim/stats/op_profile.h). None when chip 0's HBM moved nothing.
    if (const sim::ChipReport* chip = report.chip(sim::ChipId{0}); chip != nullptr) {
      for (const sim::OpFigures& op : chip->ops) {
        OpTiming& o = t.ops.emplace_back();
        o.label = op.label;
        o.op = op.op;
        o.flops = op.flops;
        o.mxu_flops = op.mxu_flops;
        o.hbm_bytes = op.hbm_bytes;
        o.ici_bytes = op.ici_bytes;
        o.seconds = static_cast<double>(op.cycles) / hz;
        o.instructions = op.instructions;
      }
    }
    t.roofs.peak_flops = slice.chip.peak_bf16_flops;
    t.roofs.peak_vector_flops = slice.chip.core.vector_elements_per_s * slice.chip.tensor_cores;
    t.roofs.hbm_bytes_per_second = slice.chip.hbm.bandwidth_bytes_per_s;
    return t;
  }

  std::string slice_;
  bool timing_only_ = false;
  std::optional<traces::TrackId> host_loop_track_;
};

}  // namespace

std::unique_ptr<Backend> make_tpusim_backend(const std::string& slice) {
  return std::make_unique<TpusimBackend>(slice);
}

const BackendDeclaration& tpusim_backend_declaration() {
  static const BackendDeclaration declaration = [] {
    BackendDeclaration d;
    d.name = "tpusim";
    d.description = "the compiler and the SystemC model of a TPU slice (simulated time)";
    d.supports.precisions = {"mxu"};  // the MXU's bf16 products, whatever is asked
    d.supports.dtype_policies = {"float32", "mixed_bfloat16"};
    d.supports.runs_a_slice = true;
    d.supports.simulated_time = true;
    d.supports.timing_only = true;
    d.supports.traces = true;
    d.supports.folding = true;
    d.supports.fusion_options = true;
    d.supports.allreduce_algorithms = {"ring", "bidir_ring", "torus2d", "torus"};
    d.supports.collective_timing = true;
    d.mixed_bfloat16_note =
        "tpusim charges bf16 transfers and HBM footprints at 2 bytes an element, as a TPU's, but "
        "rounds each reduction's (and unfused patches_to_image's) result to bf16 in a pass of its "
        "own, which a TPU fuses into the op (docs/estimator.md, mixed precision)";
    d.availability = [] { return BackendAvailability{true, true, ""}; };
    d.make = [](const BackendArgs& args) -> absl::StatusOr<std::unique_ptr<Backend>> {
      return make_tpusim_backend(args.slice);
    };
    return d;
  }();
  return declaration;
}

}  // namespace tpusim::runtime
