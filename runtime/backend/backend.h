#pragma once
// The interface every backend implements (ARCHITECTURE.md, "The runtime"): compile a graph once
// into an executable, then run it for a device loop of steps. Each step reads one batch for every
// infeed, computes the graph's outputs and applies its variable updates, so a training step and
// an inference step are the same call. An executable may hold several replicas of the step (data
// parallelism, one per core): each takes its own batch every step. Backends are chosen by name
// (make_backend); a model runs on any of them with no change.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "common/strings.h"
#include "runtime/backend/host_schedule.h"
#include "runtime/graph/graph.h"
#include "traces/trace_router.h"

namespace tpusim::runtime {

struct CompileOptions {
  // "fp32": matmuls and convolutions in f32; "mxu": their inputs rounded to bf16 and products
  // accumulated in f32, as the TPU's MXU does at DEFAULT precision.
  std::string precision = "fp32";
  // Copies of the step run side by side, one per core, each on its own batch.
  uint32_t replicas = 1;
  // How the tpusim backend's cross_replica_sum moves the data over the interconnect (the ISA's
  // Collective algorithms): "ring" (cores 0 .. replicas-1 in core order, the order the cpu and
  // gpu backends add in), "bidir_ring" (half each way round that ring), "torus2d" or "torus"
  // (over every core of the slice: replicas must be all of them). The others add in other
  // orders, so their sums differ from the cpu backend's by rounding.
  std::string allreduce = "ring";
  // Whether the tpusim backend's all-reduces run while the rest of the step computes, as XLA's
  // asynchronous all-reduce does (each starts once the gradient it sums is written, and only what
  // reads its result waits for it); off, each waits for all the step's earlier work and all later
  // work waits for it. The values are the same either way.
  bool overlap_allreduce = true;
  // XLA's all-reduce combining on the tpusim backend: the step's cross_replica_sums grouped, in
  // the order they run, into combined all-reduces of up to this many f32 bytes each, every group
  // one collective that pays one latency (tpusim_backend/allreduce_combiner.h). A group runs where
  // its last member would have, so a big threshold saves latencies and loses overlap. 0: every
  // sum its own all-reduce. A combined buffer's ring segments differ from its tensors' own, so
  // its sums add in another order than the cpu backend's and differ from them by rounding.
  uint64_t allreduce_combine_bytes = 0;
  // Whether the tpusim backend computes a convolution in one fragment with its patches (im2col)
  // in VMEM only, as XLA's convolution emitter does; off, extract_patches, the matmul and
  // patches_to_image are fragments of their own and the patches go through HBM. The values are
  // the same either way.
  bool fuse_convolutions = true;
  // Whether the tpusim backend computes a max pool whose windows tile the image, and its
  // gradient, in one vector-unit fragment each, as XLA's reduce-window and select-and-scatter;
  // off, extract_patches, reduce_max and the gradient's masks go through HBM as fragments of
  // their own. The values are the same either way.
  bool fuse_pools = true;
  // Whether the tpusim backend computes a reduce_sum or reduce_max over the last axis (or over all
  // but the last) together with the elementwise ops that produce its input, tile by tile in VMEM,
  // as XLA's input fusion; off, those ops write their value to HBM for the reduction to read.
  // Over the last axis the values are the same either way; down the rows the partial sums of
  // VMEM tiles are added in order, so f32 sums can round differently.
  bool fuse_reductions = true;
  // Whether the tpusim backend computes an elementwise value that several elementwise fragments
  // of its shape read again inside each of them, as XLA duplicates cheap producers into their
  // consumers' fusions; off, it is written to HBM and each reads it. The values are the same
  // either way.
  bool recompute_shared_producers = true;
  // The cpu backend's reduce_sum accumulates in double unless this is set; set, in f32 in the
  // same order, as the TPU's vector unit (and tpusim) sums. tpusim compare's rounding baseline
  // sets it on its nudged run, so that the baseline's drift includes what f32 sums add. The
  // other backends ignore it (tpusim always sums in f32; gpu sums as the cpu does by default).
  bool f32_reductions = false;
  // Replica folding (ARCHITECTURE.md, "Scale"; the tpusim backend, timing-only runs): only
  // replicas 0 .. simulated_replicas-1 run the step cycle-level, take batches and give outputs;
  // every other replica's core is a shadow that runs only the step's collectives, joining each
  // when the simulated replicas do (they are symmetric), so the interconnect and every chip's
  // share of the collectives' HBM traffic are simulated in full while the slice's other cores
  // cost no compute. 0 (or `replicas`): every replica simulated.
  uint32_t simulated_replicas = 0;
};

// The names CompileOptions::allreduce takes.
inline constexpr const char* kAllReduceAlgorithms = "ring, bidir_ring, torus2d or torus";
bool is_allreduce_algorithm(const std::string& name);

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

// The roofs of a roofline: one chip's peak MXU FLOPS, its vector units' peak (one FLOP per lane
// and sublane per cycle) and its HBM bandwidth. An op's compute roof is the MXUs' when they did
// any of its FLOPs, else the vector units'.
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
};

struct LoopResult {
  std::vector<std::vector<Outputs>> outputs;  // [step][simulated replica]
  DeviceTiming timing;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
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
  virtual absl::Status set_timing_only(bool timing_only) {
    if (!timing_only) return absl::OkStatus();
    return absl::UnimplementedError(str_cat("the ", name(),
                                            " backend always computes values (timing-only needs "
                                            "the tpusim backend)"));
  }
  // Simulated seconds since the process's simulation began (0 on backends without simulated
  // time): where a loop about to run starts on the trace's timeline.
  virtual double device_now_seconds() const { return 0; }
};

// The backend named `name` ("cpu", ...); NotFound lists the known ones.
absl::StatusOr<std::unique_ptr<Backend>> make_backend(const std::string& name);

// Where backends that simulate time (tpusim) report their timeline: every unit of the
// process's simulated slice, the host round trips between device loops, and whatever the caller
// adds (host pipeline stages). Nothing is recorded until a trace writer is attached.
traces::TraceRouter& device_trace_router();

// The options every backend accepts: precision "fp32" or "mxu", at least one replica, a known
// allreduce, no more simulated replicas than replicas and folding only on tpusim. Errors start
// with "<backend> backend: ".
absl::Status check_compile_options(const std::string& backend, const CompileOptions& options);

// Per node of `graph`, the id of the last node that reads it (graph.size() for outputs and
// update values, -1 when nothing does): an interpreting backend drops a value after it.
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
