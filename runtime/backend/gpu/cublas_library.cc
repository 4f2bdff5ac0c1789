#include "runtime/backend/gpu/cublas_library.h"

#include <dlfcn.h>

#include "common/strings.h"

namespace tpusim::runtime::gpu {
namespace {

// The symbol behind a name cublas_v2.h may #define (cublasCreate is cublasCreate_v2).
#define TPUSIM_SYMBOL_NAME(name) TPUSIM_SYMBOL_NAME_OF(name)
#define TPUSIM_SYMBOL_NAME_OF(name) #name

// The pointer types match the header's exported declarations (unevaluated: nothing is linked).
static_assert(sizeof(static_cast<CublasLibrary::GemmEx>(&cublasGemmEx)) > 0);
static_assert(
    sizeof(static_cast<CublasLibrary::GemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)) > 0);
static_assert(sizeof(static_cast<CublasLibrary::GemmBatchedEx>(&cublasGemmBatchedEx)) > 0);

template <typename Fn>
void find(void* handle, const char* symbol, Fn* fn, std::vector<std::string>* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (*fn == nullptr) missing->push_back(symbol);
}

}  // namespace

std::vector<std::string> CublasLibrary::default_files() {
  const std::string name = str_cat("libcublas.so.", CUBLAS_VER_MAJOR);
  return {name, str_cat(TPUSIM_CUBLAS_DIR, "/", name)};
}

absl::StatusOr<CublasLibrary> CublasLibrary::load(const std::vector<std::string>& files) {
  std::vector<std::string> failures;
  for (const std::string& file : files) {
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      failures.push_back(why != nullptr ? why : str_cat(file, ": dlopen failed"));
      continue;
    }
    CublasLibrary lib;
    std::vector<std::string> missing;
    find(handle, TPUSIM_SYMBOL_NAME(cublasCreate), &lib.create, &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasDestroy), &lib.destroy, &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasSetMathMode), &lib.set_math_mode, &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasGemmEx), &lib.gemm_ex, &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasGemmStridedBatchedEx), &lib.gemm_strided_batched_ex,
         &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasGemmBatchedEx), &lib.gemm_batched_ex, &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasGetStatusName), &lib.status_name, &missing);
    find(handle, TPUSIM_SYMBOL_NAME(cublasGetStatusString), &lib.status_string, &missing);
    if (missing.empty()) return lib;  // the handle stays open: the pointers live in it
    failures.push_back(str_cat(file, " lacks ", str_join(missing, ", ")));
    dlclose(handle);
  }
  return absl::UnavailableError(
      str_cat("cannot load cuBLAS: ", files.empty() ? "no file to try" : str_join(failures, "; ")));
}

absl::StatusOr<const CublasLibrary*> CublasLibrary::get() {
  static const absl::StatusOr<CublasLibrary> loaded = load(default_files());
  if (!loaded.ok()) return loaded.status();
  return &*loaded;
}

absl::Status CublasLibrary::status(cublasStatus_t err, std::string_view what) const {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(str_cat(what, ": ", status_name(err), " (", status_string(err), ")"));
}

}  // namespace tpusim::runtime::gpu
