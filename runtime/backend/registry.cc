#include "runtime/backend/registry.h"

#include "common/strings.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/gpu/gpu_backend.h"
#include "runtime/backend/tpusim/tpusim_backend.h"

namespace tpusim::runtime {

const std::vector<BackendDeclaration>& registered_backends() {
  static const std::vector<BackendDeclaration> table = {
      tpusim_backend_declaration(),
      cpu_backend_declaration(),
      gpu_backend_declaration(),
  };
  return table;
}

const BackendDeclaration& reference_backend() {
  for (const BackendDeclaration& b : registered_backends()) {
    if (b.numerics_reference) return b;
  }
  return registered_backends().front();  // unreachable: the cpu backend declares itself so
}

absl::StatusOr<const BackendDeclaration*> find_backend(const std::string& name) {
  for (const BackendDeclaration& b : registered_backends()) {
    if (b.name == name) return &b;
  }
  return absl::NotFoundError(
      str_cat("no backend named '", name, "' (known: ", backend_names(", "), ")"));
}

std::string backend_names(const std::string& separator) {
  std::vector<std::string> names;
  for (const BackendDeclaration& b : registered_backends()) names.push_back(b.name);
  return str_join(names, separator);
}

absl::StatusOr<std::unique_ptr<Backend>> make_backend(const std::string& name,
                                                      const BackendArgs& args) {
  auto backend = find_backend(name);
  if (!backend.ok()) return backend.status();
  return (*backend)->make(args);
}

absl::Status check_registered_options(const std::string& name, const CompileOptions& options,
                                      const RunFeatures& run, OptionNames names) {
  auto backend = find_backend(name);
  if (!backend.ok()) return backend.status();
  return check_backend_options(**backend, options, run, names, registered_backends());
}

}  // namespace tpusim::runtime
