#pragma once
// The interface every backend implements (docs/architecture.md, "The runtime"): compile a graph
// once into an executable, then run it for a device loop of steps. Each step reads one batch for
// every infeed, computes the graph's outputs and applies its variable updates, so a training step
// and an inference step are the same call. An executable may hold several replicas of the step
// (data parallelism, one per core): each takes its own batch every step. Backends are chosen by
// name through the registry (registry.h); a model runs on any of them with no change.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "common/strings.h"
#include "runtime/backend/compile_options.h"
#include "runtime/backend/declaration.h"
#include "runtime/backend/host_schedule.h"
#include "runtime/graph/graph.h"
#include "runtime/graph/hbm_floor.h"
#include "traces/trace_router.h"

namespace tpusim::runtime {

using Feeds = std::map<std::string, HostTensor>;      // infeed name -> one batch
using Variables = std::map<std::string, HostTensor>;  // variable name -> value
using Outputs = std::map<std::string, HostTensor>;    // output name -> value

class Executable {
 public:
  virtual ~Executable() = default;
  virtual const Graph& graph() const = 0;
  virtual uint32_t replicas() const = 0;
  // The replicas that take batches and give outputs (CompileOptions::simulated_replicas): all
  // of them unless folded.
  virtual uint32_t simulated_replicas() const { return replicas(); }
};

// One step of a device loop: a batch for every simulated replica, and when the host has them
// ready.
struct LoopStep {
  std::vector<Feeds> replicas;  // one per simulated replica
  // Step `host_step` of `host` says when they are ready; none: at once.
  std::shared_ptr<HostSchedule> host;
  uint64_t host_step = 0;
};

// One graph op's work and time over a device loop on one chip (tpusim): the compiler tags every
// instruction with the node it computes, and the simulator adds up what each did.
struct OpTiming {
  std::string label;     // the graph node: "dense_1/matmul"
  std::string op;        // "matmul", "fused" (elementwise nodes computed together), "infeed", ...
  double flops = 0;      // MXU: 2 per multiply-accumulate; vector unit: 1 per arithmetic element
  double mxu_flops = 0;  // the MXUs' part: an op with none is the vector unit's
  double hbm_bytes = 0;
  double ici_bytes = 0;  // sent over the interconnect (collectives): rated by no roof here
  double seconds = 0;    // its span per step on chip 0 (first start on any core to last end on
                         // any), summed over the loop's steps
  uint64_t instructions = 0;
};

// The roofs of a roofline: one chip's peak MXU FLOPS, its vector units' peak (one FLOP per ALU,
// `vector_alus` of them per lane and sublane, a cycle) and its HBM bandwidth. An op's compute roof
// is the MXUs' when they did any of its FLOPs, else the vector units'.
struct ChipRoofs {
  double peak_flops = 0;
  double peak_vector_flops = 0;
  double hbm_bytes_per_second = 0;
  // Arithmetic intensity (FLOPs per HBM byte) where the HBM roof meets the MXU roof, and the
  // vector units' roof.
  double ridge_intensity() const {
    return hbm_bytes_per_second > 0 ? peak_flops / hbm_bytes_per_second : 0;
  }
  double vector_ridge_intensity() const {
    return hbm_bytes_per_second > 0 ? peak_vector_flops / hbm_bytes_per_second : 0;
  }
};

// One simulated core's graph ops over a device loop, each with its span in every step it ran in
// (kept only when asked: Backend::keep_op_spans), for a profile's op timeline.
struct CoreOpSpans {
  struct Span {
    uint64_t step = 0;                  // the global step the span is in (1 for the first)
    uint64_t start_ps = 0, end_ps = 0;  // simulated time, on the trace's timeline
  };
  uint32_t core = 0;                     // the core's ordinal in the slice (TPU:N)
  std::vector<OpTiming> ops;             // in origin order; flops and bytes over the loop
  std::vector<std::vector<Span>> spans;  // per op, per step, from its first instruction's start
                                         // to its last one's end on this core
};

// Adds one loop's op figures to a running total: matched by label and op, ops not yet in it
// appended in order.
void add_op_timings(const std::vector<OpTiming>& loop, std::vector<OpTiming>* total);

// How long a loop took on a backend that simulates time (tpusim); `simulated` is false and the
// rest zero elsewhere.
struct DeviceTiming {
  bool simulated = false;
  uint64_t cycles = 0;  // the loop's start to the last replica's halt
  double seconds = 0;
  // Per simulated replica: cycles its infeed dequeues waited on an empty infeed queue, and the
  // MXUs' share of peak over the loop.
  std::vector<uint64_t> infeed_wait_cycles;
  std::vector<double> mxu_utilization;
  // Per graph op on chip 0 (the cores of it that ran, their FLOPs and bytes summed), in program
  // order, and the chip's roofs.
  std::vector<OpTiming> ops;
  ChipRoofs roofs;
  // Per simulated core that ran its own replica, when the backend keeps op spans.
  std::vector<CoreOpSpans> core_ops;
  // The HBM floor of one step on chip 0: the graph's (hbm_floor.h) times the replicas its cores
  // run.
  HbmFloor hbm_floor;
};

struct LoopResult {
  std::vector<std::vector<Outputs>> outputs;  // [step][simulated replica]
  DeviceTiming timing;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // What the backend is and supports (declaration.h); the registry lists the same.
  virtual const BackendDeclaration& declaration() const = 0;
  const std::string& name() const;
  virtual absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                              const CompileOptions& options) = 0;
  // Runs a device loop of `steps`, numbered from `first_step` (the counter that random ops such
  // as dropout use). `variables` must hold every variable of the graph; every replica starts
  // from them, and afterwards they hold replica 0's values (the same as every replica's when the
  // step all-reduces its gradients).
  virtual absl::StatusOr<LoopResult> run_loop(Executable& executable, Variables& variables,
                                              const std::vector<LoopStep>& steps,
                                              uint64_t first_step) = 0;
  // One replica, every batch ready at the start: one step per element of `feeds`, each step's
  // outputs.
  absl::StatusOr<std::vector<Outputs>> run(Executable& executable, Variables& variables,
                                           const std::vector<Feeds>& feeds, uint64_t first_step);

  // The host's round trip between two device loops (reading the outfeed, launching the next
  // loop): a backend that simulates time lets the device idle that long, and its trace shows it.
  virtual absl::Status host_round_trip(double seconds) {
    (void)seconds;
    return absl::OkStatus();
  }
  // Timing only: skip the device's numerics (outputs read as zeros, variables stay as they
  // were) while time is simulated as before. Unimplemented on backends without simulated time.
  // A backend that supports it (BackendSupport::timing_only) overrides this; the others refuse.
  virtual absl::Status set_timing_only(bool timing_only);
  // Simulated seconds since the process's simulation began (0 on backends without simulated
  // time): where a loop about to run starts on the trace's timeline.
  virtual double device_now_seconds() const { return 0; }
  // Whether each loop's timing keeps every core's op spans (DeviceTiming::core_ops: a profile's
  // op timeline); backends without simulated time keep none.
  virtual void keep_op_spans(bool keep) { (void)keep; }
};

// Where backends that simulate time (tpusim) report their timeline: every unit of the
// process's simulated slice, the host round trips between device loops, and whatever the caller
// adds (host pipeline stages). Nothing is recorded until a trace writer is attached.
traces::TraceRouter& device_trace_router();

// Per node of `graph`, the id of the last live node (live_nodes) that reads it (graph.size() for
// outputs and update values, -1 when nothing live does): an interpreting backend drops a value
// after it.
std::vector<int> last_uses(const Graph& graph);

// Checks that `feeds` has a batch of the right type and shape for every infeed of `graph`, and
// `variables` every variable; errors name the infeed or variable and both shapes.
absl::Status check_inputs(const Graph& graph, const Variables& variables, const Feeds& feeds);
// The values `infeed` takes from a host batch: a bf16 infeed's rounded to bf16 (to nearest even),
// as the host's cast and the tpusim backend's host link do, written to `rounded` and returned;
// any other infeed's `batch` itself, uncopied. Every backend feeds through it, so a caller's
// unrounded f32 batch gives the same values everywhere (the infeed driver's are rounded already).
const HostTensor& infeed_value(const Node& infeed, const HostTensor& batch, HostTensor& rounded);
// check_inputs for every step and replica of a loop; errors name the step and replica.
absl::Status check_loop(const Executable& executable, const Variables& variables,
                        const std::vector<LoopStep>& steps, uint64_t first_step);

}  // namespace tpusim::runtime
