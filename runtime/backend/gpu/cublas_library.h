#pragma once
// cuBLAS, opened with dlopen the first time the gpu backend needs it instead of linked. Linking it
// cost every process with the runtime in it about 0.1 s and 220 MB of resident memory at start
// (the dynamic loader maps and relocates libcublasLt's 500 MB), for a backend most runs never
// use: every tpusim command and every test process paid it, with or without a GPU. The table
// holds the entry points the backend calls; the library stays loaded for the process's life.

#include <string>
#include <string_view>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <cublas_v2.h>

namespace tpusim::runtime::gpu {

struct CublasLibrary {
  // The GEMMs' exported forms (with cublasComputeType_t); cublas_api.h overloads both in C++.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  using GemmStridedBatchedEx = cublasStatus_t (*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long int, const void*, cudaDataType, int, long long int, const void*,
      void*, cudaDataType, int, long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
  using GemmBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                           int, int, int, const void*, const void* const[],
                                           cudaDataType, int, const void* const[], cudaDataType,
                                           int, const void*, void* const[], cudaDataType, int, int,
                                           cublasComputeType_t, cublasGemmAlgo_t);

  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  GemmEx gemm_ex = nullptr;
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
  GemmBatchedEx gemm_batched_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;

  // The process's cuBLAS, loaded on the first call (thread-safe) from default_files() in turn.
  // Unavailable, naming every file tried and why it failed, when none loads.
  static absl::StatusOr<const CublasLibrary*> get();
  // The first of `files` (names the dynamic loader searches for, or paths) that loads and has
  // every entry point.
  static absl::StatusOr<CublasLibrary> load(const std::vector<std::string>& files);
  // libcublas.so.MAJOR of the headers built against, found the loader's way (LD_LIBRARY_PATH,
  // its cache), then the same file in the CUDA toolkit found at configure time.
  static std::vector<std::string> default_files();

  // `err` as a Status: OK, or Internal saying `what` failed with the error's name and text.
  absl::Status status(cublasStatus_t err, std::string_view what) const;
};

}  // namespace tpusim::runtime::gpu
