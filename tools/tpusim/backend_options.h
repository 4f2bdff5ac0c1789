#pragma once
// The CLI's side of the backend registry (runtime/backend/registry.h): the --backend flag, the
// compile-option flags train and compile share, read into a runtime::CompileOptions, and what a
// run on a backend is called and how many replicas it has. Which backend honours which flag is
// the registry's to say (check_registered_options with OptionNames::kFlags).

#include <cstdint>
#include <string>

#include <absl/status/statusor.h>
#include <boost/program_options.hpp>

#include "runtime/backend/declaration.h"

namespace tpusim::cli {

// The precision the CLI runs every backend at unless --precision says otherwise: the MXU's bf16
// products (tpusim always computes so; cpu and gpu as cpu:mxu and gpu:mxu).
inline constexpr runtime::Precision kCliPrecision = runtime::Precision::kMxu;
// Replicas on a backend that runs no slice: a v3-8's cores, so that a run's batches and steps
// are the same as on the default slice.
inline constexpr uint32_t kHostReplicas = 8;

// --backend NAME (default tpusim), its help listing the registered backends.
void add_backend_flag(boost::program_options::options_description& options);
// --precision mxu|fp32 (default kCliPrecision): what matmuls and convolutions compute.
void add_precision_flag(boost::program_options::options_description& options);
// --precision's value on `backend`; InvalidArgument (a usage error) for an unknown one, or for
// fp32 on a backend that computes only the MXU's way (tpusim).
absl::StatusOr<runtime::Precision> precision_from(const boost::program_options::variables_map& vm,
                                                  const runtime::BackendDeclaration& backend);
// --allreduce, --overlap-allreduce, --allreduce-combine-threshold, --fuse-convolutions,
// --fuse-pools, --fuse-reductions, --fuse-multi-output, --fuse-conv-reductions and
// --recompute-shared-producers.
void add_compile_flags(boost::program_options::options_description& options);

// --backend's declaration; InvalidArgument (a usage error) lists the registered backends.
absl::StatusOr<const runtime::BackendDeclaration*> backend_from(
    const boost::program_options::variables_map& vm);
// The compile flags' values at kCliPrecision; InvalidArgument (a usage error) names the flag.
absl::StatusOr<runtime::CompileOptions> compile_options_from(
    const boost::program_options::variables_map& vm);

// What a run on `backend` runs on, for its log lines: the slice ("v3-8") or "the cpu backend".
std::string run_target(const runtime::BackendDeclaration& backend, const std::string& slice);
// The replicas (num_shards) of a run on `backend`: the slice's cores where it runs a slice,
// kHostReplicas elsewhere. Errors are the slice loader's.
absl::StatusOr<uint32_t> run_replicas(const runtime::BackendDeclaration& backend,
                                      const std::string& slice);

}  // namespace tpusim::cli
