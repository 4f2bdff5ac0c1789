#include "runtime/backend/gpu/gemm_call.h"

#include <climits>

#include "common/strings.h"

namespace tpusim::runtime::gpu {
namespace {
bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }
}  // namespace

absl::StatusOr<GemmCall> gemm_call(const MatMulPlan& plan) {
  GemmCall call;
  // A shared rhs (rank 2) makes every batch's rows one [batches x M, K] lhs: a single GEMM.
  const int64_t rows = plan.shared_rhs ? plan.batches * plan.m : plan.m;
  const int64_t batches = plan.shared_rhs ? 1 : plan.batches;
  call.a_elements = rows * plan.k * batches;
  call.b_elements = plan.k * plan.n * batches;
  call.out_elements = rows * plan.n * batches;
  if (rows == 0 || plan.n == 0 || batches == 0) {
    call.nothing_to_do = true;
    return call;
  }
  if (!fits_int(rows) || !fits_int(plan.k) || !fits_int(plan.n) || !fits_int(batches)) {
    return absl::UnimplementedError(str_cat("GEMM [", rows, ", ", plan.k, "] x [", plan.k, ", ",
                                            plan.n, "] x ", batches,
                                            " batches exceeds cuBLAS's 32-bit sizes"));
  }
  call.zero_fill = plan.k == 0;
  // out^T [N, rows] = b^T [N, K] x a^T [K, rows], each column-major with its row length as
  // the leading dimension.
  call.m = static_cast<int>(plan.n);
  call.n = static_cast<int>(rows);
  call.k = static_cast<int>(plan.k);
  call.lda = call.m;  // cuBLAS's A: the plan's b, [K, N] row-major
  call.ldb = call.k;  // cuBLAS's B: the plan's a, [rows, K] row-major
  call.ldc = call.m;  // out, [rows, N] row-major
  call.stride_a = plan.k * plan.n;
  call.stride_b = rows * plan.k;
  call.stride_c = rows * plan.n;
  call.batch_count = static_cast<int>(batches);
  return call;
}

}  // namespace tpusim::runtime::gpu
