#pragma once
// The BLAS definition of a column-major strided batched GEMM, element by element, as the gpu
// backend's host tests check the cuBLAS calls it makes (gemm_call.h) against.

#include <cstdint>
#include <vector>

#include "runtime/backend/gpu/gemm_call.h"

namespace tpusim::runtime::gpu::testing {

// Element (i, j) of batch g of call c of `call` by the BLAS definition of a column-major
// strided batched GEMM (batch g's operands where GemmCall::a_offset and b_offset put them): the
// sum over l of op(A)[i, l] op(B)[l, j] in f32, l ascending.
inline float blas_element(const GemmCall& call, const std::vector<float>& a,
                          const std::vector<float>& b, int64_t c, int64_t g, int64_t i, int64_t j) {
  float acc = 0;
  for (int64_t l = 0; l < call.k; ++l) {
    const int64_t ai = call.transa ? l + i * call.lda : i + l * call.lda;
    const int64_t bi = call.transb ? j + l * call.ldb : l + j * call.ldb;
    acc += a.at(static_cast<size_t>(c * call.call_stride_a + call.a_offset(g) + ai)) *
           b.at(static_cast<size_t>(c * call.call_stride_b + call.b_offset(g) + bi));
  }
  return acc;
}

}  // namespace tpusim::runtime::gpu::testing
