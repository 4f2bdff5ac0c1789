# Eigen's kernels are several times faster with AVX2 and FMA than with x86-64's SSE2 baseline.
# TPUSIM_ARCH_FLAGS defaults to -march=x86-64-v3 (AVX2, FMA, BMI2: every x86 server of the last
# decade) when this machine can run it, else to nothing. Set it empty for a portable build.
if(NOT DEFINED TPUSIM_ARCH_FLAGS)
  set(TPUSIM_ARCH_FLAGS "")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    file(WRITE ${CMAKE_BINARY_DIR}/arch_probe.cc
      "#include <immintrin.h>\nint main() { __m256 a = _mm256_set1_ps(1.f); a = _mm256_fmadd_ps(a, a, a);\n"
      "  float out[8]; _mm256_storeu_ps(out, a); return out[0] == 2.f ? 0 : 1; }\n")
    try_run(arch_runs arch_compiles ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/arch_probe.cc
      COMPILE_DEFINITIONS -march=x86-64-v3)
    if(arch_compiles AND arch_runs EQUAL 0)
      set(TPUSIM_ARCH_FLAGS "-march=x86-64-v3")
    endif()
  endif()
  set(TPUSIM_ARCH_FLAGS "${TPUSIM_ARCH_FLAGS}" CACHE STRING "Target CPU flags for tpusim's C++ code")
endif()
message(STATUS "tpusim arch flags: '${TPUSIM_ARCH_FLAGS}'")

# Eigen's fast math (EIGEN_FAST_MATH, on unless set) takes float sqrt and rsqrt from the CPU's
# RSQRTPS estimate and one Newton step. The estimate's bits are the CPU maker's choice (Intel's
# SDM promises only a relative error under 1.5 x 2^-12), so the simulated values, and every loss
# after them, differed between an Intel and another x86-64 CPU. Off, sqrt and rsqrt are IEEE
# (sqrtps, divps) and tanh, erf, sin and cos the C library's, as the cpu backend computes them:
# docs/reliability.md, "Figures that hold on any host".
add_compile_definitions(EIGEN_FAST_MATH=0)
