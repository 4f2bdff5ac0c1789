// cuBLAS is opened at run time, not linked (runtime/backend/gpu/cublas_library.h): a process that
// never makes a gpu backend never maps it, and loading needs the library, not a GPU, so these run
// wherever the CUDA toolkit was found at configure time.
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/registry.h"

#if defined(TPUSIM_HAVE_CUDA)
#include "runtime/backend/gpu/cublas_library.h"
#endif

namespace tpusim::runtime {
namespace cublas_library_test {

using ::testing::HasSubstr;

bool cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("libcublas") != std::string::npos;
}

// Each test runs in its own process (gtest_discover_tests), so nothing before this one loaded it.
TEST(CublasLibrary, NothingMapsItUntilAGpuBackendIsMade) {
  EXPECT_FALSE(cublas_mapped()) << "the test binary links cuBLAS";
  auto gpu = find_backend("gpu");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_FALSE((*gpu)->name.empty());
  (*gpu)->availability();  // probes CUDA
  if (make_backend("gpu").ok()) GTEST_SKIP() << "a GPU is usable here: making its backend loads it";
  EXPECT_FALSE(cublas_mapped()) << "probing or failing to make the gpu backend loaded cuBLAS";
}

#if defined(TPUSIM_HAVE_CUDA)

TEST(CublasLibrary, LoadsEveryEntryPointWithoutAGpu) {
  auto lib = gpu::CublasLibrary::get();
  ASSERT_TRUE(lib.ok()) << lib.status();
  const gpu::CublasLibrary& l = **lib;
  EXPECT_TRUE(l.create && l.destroy && l.set_math_mode && l.gemm_ex && l.gemm_strided_batched_ex &&
              l.status_name && l.status_string);
  EXPECT_TRUE(cublas_mapped());
  EXPECT_EQ(*gpu::CublasLibrary::get(), &l);  // loaded once
  EXPECT_TRUE(l.status(CUBLAS_STATUS_SUCCESS, "cublasCreate").ok());
  const absl::Status failed = l.status(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate");
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.message(), HasSubstr("cublasCreate: CUBLAS_STATUS_NOT_INITIALIZED ("));
}

TEST(CublasLibrary, EveryFileTriedIsNamedWithWhyItFailed) {
  const auto lib = gpu::CublasLibrary::load({"/nonexistent/libcublas.so.13", "libm.so.6"});
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lib.status().message(),
              HasSubstr("cannot load cuBLAS: /nonexistent/libcublas.so.13: "));
  EXPECT_THAT(lib.status().message(),
              HasSubstr("libm.so.6 lacks cublasCreate_v2, cublasDestroy_v2"));
  EXPECT_THAT(gpu::CublasLibrary::load({}).status().message(), HasSubstr("no file to try"));
}

TEST(CublasLibrary, DefaultFilesAreTheHeadersMajorVersionThenTheToolkits) {
  const auto files = gpu::CublasLibrary::default_files();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(files[1].front(), '/');
  EXPECT_THAT(files[1], ::testing::EndsWith("/" + files[0]));
}

#endif

}  // namespace cublas_library_test
}  // namespace tpusim::runtime
