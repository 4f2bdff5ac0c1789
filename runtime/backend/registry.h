#pragma once
// The backends tpusim knows, by name: one table in registry.cc, a line per backend, each entry
// the backend's own declaration (what it is, what it supports, how to make it). The CLI and the
// estimator find, check and make backends only through here.

#include <memory>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/declaration.h"

namespace tpusim::runtime {

// Every backend, in the table's order (tpusim, cpu, gpu), whether or not this binary has it.
const std::vector<BackendDeclaration>& registered_backends();

// The backend whose numerics every other is compared with (the cpu backend).
const BackendDeclaration& reference_backend();

// The backend named `name`; NotFound lists the known ones.
absl::StatusOr<const BackendDeclaration*> find_backend(const std::string& name);

// The known names joined by `separator`: "tpusim | cpu | gpu".
std::string backend_names(const std::string& separator);

// The backend named `name`, made with `args`; NotFound for an unknown name, Unavailable (with
// the reason) for one this machine cannot run.
absl::StatusOr<std::unique_ptr<Backend>> make_backend(const std::string& name,
                                                      const BackendArgs& args = {});

// check_backend_options for the backend named `name`, naming the registered backends that
// support what it does not ("--fuse-pools needs the tpusim backend (cpu and gpu: ...)").
absl::Status check_registered_options(const std::string& name, const CompileOptions& options,
                                      const RunFeatures& run = {},
                                      OptionNames names = OptionNames::kFields);

}  // namespace tpusim::runtime
