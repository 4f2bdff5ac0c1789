#include "runtime/backend/tpusim/tpusim_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/loop_io.h"
#include "runtime/backend/tpusim/shadow_program.h"
#include "sim/isa/ops.h"
#include "sim/numerics/bf16.h"
#include "sim/system.h"
#include "traces/analysis_events.h"

namespace tpusim::runtime {
namespace {

using tpusim_backend::CompiledStep;
using tpusim_backend::queue_infeeds;
using tpusim_backend::read_variables;
using tpusim_backend::receive_outputs;
using tpusim_backend::ShadowProgram;
using tpusim_backend::write_state;

// The process's System (SystemC elaborates once), for the first caller's slice and cycle cap.
absl::StatusOr<sim::System*> shared_system(const BackendArgs& args) {
  static std::unique_ptr<sim::System> system;
  static std::string built_for;
  const std::string& slice_name = args.slice;
  if (system != nullptr) {
    if (built_for != slice_name) {
      return absl::FailedPreconditionError(str_cat(
          "the tpusim backend of this process simulates ", built_for,
          "; SystemC elaborates once per process, so ", slice_name, " needs a process of its own"));
    }
    if (system->options().max_run_cycles != args.max_run_cycles) {
      return absl::FailedPreconditionError(
          str_cat("the tpusim backend of this process stops runs at ",
                  system->options().max_run_cycles, " cycles (0: never), not ", args.max_run_cycles,
                  "; SystemC elaborates once per process"));
    }
    return system.get();
  }
  auto slice = config::load_slice(slice_name);
  if (!slice.ok()) return slice.status();
  sim::SystemOptions options;
  options.sink = &device_trace_router();
  options.max_run_cycles = args.max_run_cycles;
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
        step_floor_(hbm_floor(graph_)),
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
  // One replica's step's HBM floor (runtime/graph/hbm_floor.h).
  const HbmFloor& step_floor() const { return step_floor_; }
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
  HbmFloor step_floor_;
  std::vector<CompiledStep> per_position_;
  std::vector<ShadowProgram> shadows_;  // per position; empty unless folded
  uint32_t replicas_;
  uint32_t simulated_;
  isa::ArenaProgram program_;  // every replica's copy of its position's program
};

// The program's device loops set to run `steps` steps from global step `first_step`.
void set_loop_counts(TpusimExecutable& exe, size_t steps, uint64_t first_step) {
  isa::Program& program = exe.program();
  program.set_step_base(first_step);
  for (uint32_t r = 0; r < exe.replicas(); ++r) {
    const int loop = exe.loop_instruction(r);
    if (loop < 0 || program.cores(static_cast<int>(r)).has_instructions_from()) continue;
    program.mutable_cores(static_cast<int>(r))
        ->mutable_instructions(loop)
        ->mutable_loop()
        ->set_count(static_cast<uint32_t>(steps));
  }
}

class TpusimBackend final : public Backend {
 public:
  explicit TpusimBackend(BackendArgs args) : args_(std::move(args)) {}
  const BackendDeclaration& declaration() const override { return tpusim_backend_declaration(); }

  absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                      const CompileOptions& options) override {
    if (absl::Status st = check_backend_options(declaration(), options); !st.ok()) return st;
    auto system = shared_system(args_);
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
      return absl::InvalidArgumentError(str_cat(
          "tpusim backend: allreduce '", kAllReduceAlgorithms.name(options.allreduce),
          "' runs over every core of ", slice.name, " (", slice.cores, "), but the step has ",
          options.replicas, " replica(s): use ring or bidir_ring, or one replica per core"));
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
    auto system_or = shared_system(args_);
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
    const auto step_for = [&exe](uint32_t r) -> const CompiledStep& { return exe.step_for(r); };
    if (auto st = queue_infeeds(system, steps, simulated, step_for, timing_only_); !st.ok())
      return st;
    set_loop_counts(exe, steps.size(), first_step);
    system.set_timing_only(timing_only_);
    auto run = system.run(exe.program());
    if (!run.ok()) return run.status();
    LoopResult result;
    auto outputs = receive_outputs(system, simulated, step_for, steps.size());
    if (!outputs.ok()) return outputs.status();
    result.outputs = *std::move(outputs);
    // Replica 0's variables are the result (unchanged when timing only).
    if (!timing_only_) {
      if (auto st = read_variables(system, g, exe.step_for(0), &variables); !st.ok()) return st;
    }
    result.timing = timing_of(system, *run, keep_op_spans_);
    uint32_t on_chip_0 = 0;
    for (uint32_t r = 0; r < simulated; ++r)
      on_chip_0 += cores.chip_of(sim::CoreId{r}) == sim::ChipId{0} ? 1 : 0;
    result.timing.hbm_floor = exe.step_floor().scaled(on_chip_0);
    return result;
  }

  absl::Status host_round_trip(double seconds) override {
    auto system = shared_system(args_);
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
    auto system = shared_system(args_);
    if (!system.ok()) return 0;
    return static_cast<double>((*system)->now_cycle()) / (*system)->clock().frequency_hz();
  }

  void keep_op_spans(bool keep) override { keep_op_spans_ = keep; }

 private:
  // An op's figures as the backend reports them, its cycles at `hz`.
  static OpTiming op_timing(const sim::OpFigures& op, double hz) {
    OpTiming o;
    o.label = op.label;
    o.op = op.op;
    o.flops = op.flops;
    o.mxu_flops = op.mxu_flops;
    o.hbm_bytes = op.hbm_bytes;
    o.ici_bytes = op.ici_bytes;
    o.seconds = static_cast<double>(op.cycles) / hz;
    o.instructions = op.instructions;
    return o;
  }

  // Every core's ops with their spans in simulated picoseconds (CoreOpSpans).
  static std::vector<CoreOpSpans> core_op_spans(const sim::System& system,
                                                const sim::RunReport& report) {
    std::vector<CoreOpSpans> out;
    const double hz = system.clock().frequency_hz();
    for (const sim::CoreReport& core : report.cores) {
      if (core.shadow) continue;
      CoreOpSpans& c = out.emplace_back();
      c.core = static_cast<uint32_t>(core.core);
      for (const sim::OpFigures& op : core.ops) {
        c.ops.push_back(op_timing(op, hz));
        std::vector<CoreOpSpans::Span>& spans = c.spans.emplace_back();
        for (const sim::OpSpan& s : op.spans) {
          spans.push_back({s.step + 1, system.clock().time_of(sim::Cycles(s.start)),
                           system.clock().time_of(sim::Cycles(s.end))});
        }
      }
    }
    return out;
  }

  static DeviceTiming timing_of(sim::System& system, const sim::RunResult& run,
                                bool keep_op_spans) {
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
        t.ops.push_back(op_timing(op, hz));
      }
    }
    if (keep_op_spans) t.core_ops = core_op_spans(system, report);
    t.roofs.peak_flops = slice.chip.peak_bf16_flops;
    t.roofs.peak_vector_flops = slice.chip.core.vector_elements_per_s * slice.chip.tensor_cores;
    t.roofs.hbm_bytes_per_second = slice.chip.hbm.bandwidth_bytes_per_s;
    return t;
  }

  BackendArgs args_;  // the slice and the cycle cap
  bool timing_only_ = false;
  bool keep_op_spans_ = false;
  std::optional<traces::TrackId> host_loop_track_;
};

}  // namespace

std::unique_ptr<Backend> make_tpusim_backend(const BackendArgs& args) {
  return std::make_unique<TpusimBackend>(args);
}

std::unique_ptr<Backend> make_tpusim_backend(const std::string& slice) {
  BackendArgs args;
  args.slice = slice;
  return make_tpusim_backend(args);
}

const BackendDeclaration& tpusim_backend_declaration() {
  static const BackendDeclaration declaration = [] {
    BackendDeclaration d;
    d.name = "tpusim";
    d.description = "the compiler and the SystemC model of a TPU slice (simulated time)";
    d.supports.precisions = {Precision::kMxu};  // the MXU's bf16 products, whatever is asked
    d.supports.dtype_policies = {DTypePolicy::kFloat32, DTypePolicy::kMixedBFloat16};
    d.supports.runs_a_slice = true;
    d.supports.simulated_time = true;
    d.supports.timing_only = true;
    d.supports.traces = true;
    d.supports.folding = true;
    d.supports.fusion_options = true;
    d.supports.allreduce_algorithms = {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kBidirRing,
                                       AllReduceAlgorithm::kTorus2d, AllReduceAlgorithm::kTorus};
    d.supports.collective_timing = true;
    d.mixed_bfloat16_note =
        "tpusim charges bf16 transfers and HBM footprints at 2 bytes an element, as a TPU's, but "
        "rounds each scatter_add's and unfused patches_to_image's result to bf16 in a pass of its "
        "own, which a TPU fuses into the op (docs/estimator.md, mixed precision)";
    d.availability = [] { return BackendAvailability{true, true, ""}; };
    d.make = [](const BackendArgs& args) -> absl::StatusOr<std::unique_ptr<Backend>> {
      return make_tpusim_backend(args);
    };
    return d;
  }();
  return declaration;
}

}  // namespace tpusim::runtime
