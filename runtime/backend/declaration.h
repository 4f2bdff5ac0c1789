#pragma once
// What a backend is and what it supports, declared once by the backend itself (cpu_backend.h,
// gpu_backend.h, tpusim_backend.h) and listed by name in the registry (registry.h). Every
// option that only some backends honour is checked against these declarations by one function,
// check_backend_options, which writes every "needs the tpusim backend" error: the CLI, the
// estimator and the backends' own compile() all ask it.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "runtime/backend/compile_options.h"
#include "runtime/graph/dtype_policy.h"

namespace tpusim::runtime {

class Backend;

// What a backend does beyond computing a graph's values.
struct BackendSupport {
  // The CompileOptions::precision values it computes at. One alone: it computes that way
  // whatever is asked (tpusim: its MXU's bf16 products), and a precision named by the user is
  // refused (precision_choice_error).
  std::vector<Precision> precisions;
  // The dtype policies it trains (runtime/graph/dtype_policy.h).
  std::vector<DTypePolicy> dtype_policies;
  // It runs on a slice config: the slice's cores are its replicas and the slice's host config
  // times the input pipeline (SimulatorOptions::slice).
  bool runs_a_slice = false;
  // It simulates time: device loops have a duration, a step-time analysis and host round trips.
  bool simulated_time = false;
  bool timing_only = false;  // Backend::set_timing_only(true)
  bool traces = false;       // a timeline written to a trace file (SimulatorOptions::trace_path)
  // Replica folding (CompileOptions::simulated_replicas below replicas).
  bool folding = false;
  // The fusion switches (fuse_convolutions, fuse_pools, fuse_reductions,
  // recompute_shared_producers, fuse_multi_output, fuse_producers, fuse_conv_reductions, ...): a
  // backend without them
  // computes every op the same way.
  bool fusion_options = false;
  // The CompileOptions::allreduce algorithms its cross_replica_sum runs.
  std::vector<AllReduceAlgorithm> allreduce_algorithms;
  // It times the all-reduces, so overlap_allreduce and allreduce_combine_bytes change something.
  bool collective_timing = false;
};

// Whether this binary has a backend and whether it can run on this machine.
struct BackendAvailability {
  bool built = false;      // compiled into this binary
  bool available = false;  // can run here now
  std::string reason;      // why it cannot ("" when it can)
};

// What making a backend takes; a backend that does not run a slice ignores `slice`.
struct BackendArgs {
  std::string slice = "v3-8";  // a slice config file or built-in name
  // tpusim: a run past this many simulated cycles stops with OutOfRange, the System ready for
  // the next (sim::SystemOptions::max_run_cycles); 0: no limit but the time horizon. For
  // callers that run graphs they did not make (the saved-model fuzz harness).
  uint64_t max_run_cycles = 0;
};

struct BackendDeclaration {
  std::string name;         // what users call it: "tpusim", "cpu", "gpu"
  std::string description;  // one line for `tpusim backends`
  BackendSupport supports;
  // The reference every other backend's numerics are compared with (tpusim compare's rounding
  // baseline, opcheck's default reference): one backend only.
  bool numerics_reference = false;
  // Said to the user when a model trains in mixed_bfloat16 on it ("" for nothing to say).
  std::string mixed_bfloat16_note;
  std::function<BackendAvailability()> availability;
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(const BackendArgs&)> make;
};

// What a run asks of its backend besides its compile options.
struct RunFeatures {
  bool timing_only = false;  // SimulatorOptions::timing_only
  bool trace = false;        // SimulatorOptions::trace_path set
  bool profile = false;      // SimulatorOptions::profile
};

// How an error names an option: as CompileOptions and RunConfig hold it
// ("cpu backend: fuse_pools off needs ..."), or as the CLI's flag ("--fuse-pools needs ...").
enum class OptionNames { kFields, kFlags };

// Checks `options` and `run` against what `backend` supports: at least one replica, no more
// simulated replicas than replicas, and every option set away from what all backends do only where
// `backend` supports it. With `known` (the registry's backends), an error names those that do
// support it ("needs the tpusim backend"); every error names `backend` and why it cannot ("(cpu:
// ring order only)").
absl::Status check_backend_options(const BackendDeclaration& backend, const CompileOptions& options,
                                   const RunFeatures& run = {},
                                   OptionNames names = OptionNames::kFields,
                                   const std::vector<BackendDeclaration>& known = {});

// OK when `backend` trains the dtype policy `policy`; else an error naming both.
absl::Status check_dtype_policy(const BackendDeclaration& backend, DTypePolicy policy);

// The precision `backend` computes at when `requested` is asked for: the request where it has a
// choice, its one precision otherwise.
Precision effective_precision(const BackendDeclaration& backend, Precision requested);

// "'tpusim:fp32': tpusim's precision is its MXU's ..." for a precision the user named
// explicitly (`text`, as given) on a backend with no choice of precision; OK otherwise.
absl::Status precision_choice_error(const BackendDeclaration& backend, const std::string& text);

}  // namespace tpusim::runtime
