#include "runtime/backend/gpu/gemm_call.h"

#include <algorithm>
#include <climits>

#include "common/strings.h"

namespace tpusim::runtime::gpu {
namespace {
bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The output tile side of cuBLAS's larger GEMM kernels (128 x 128 outputs a thread block), to
// count the thread blocks a call's output makes.
constexpr int64_t kOutputTile = 128;

// The number of chunks to cut K into for a call whose output makes `tiles` thread blocks: the
// largest divisor of K up to the count that gives about two blocks a multiprocessor, with chunks
// of at least kMinChunkTerms terms; 1 for none.
int chunks_for(int64_t k, int64_t tiles, int multiprocessors) {
  const int64_t want = std::min<int64_t>(ceil_div(2 * int64_t{multiprocessors}, tiles), kMaxChunks);
  for (int64_t s = want; s > 1; --s) {
    if (k % s == 0 && k / s >= kMinChunkTerms) return static_cast<int>(s);
  }
  return 1;
}
}  // namespace

absl::StatusOr<GemmCall> gemm_call(const MatMulPlan& plan, const ReplicaLayout& layout) {
  GemmCall call;
  // A shared rhs (rank 2) makes every batch's rows one [batches x M, K] lhs: a single GEMM.
  int64_t rows = plan.shared_rhs ? plan.batches * plan.m : plan.m;
  int64_t batches = plan.shared_rhs ? 1 : plan.batches;
  const int64_t replicas = layout.out_shared() ? 1 : layout.replicas;
  // One replica's operands and product.
  const int64_t a_one = rows * plan.k * batches, b_one = plan.k * plan.n * batches;
  const int64_t out_one = rows * plan.n * batches;
  call.a_elements = a_one * (layout.a_shared ? 1 : replicas);
  call.b_elements = b_one * (layout.b_shared ? 1 : replicas);
  call.out_elements = out_one * replicas;
  // Strides between batches: within a replica, then between replicas (0: shared).
  int64_t stride_a = rows * plan.k, stride_b = plan.k * plan.n, stride_c = rows * plan.n;
  if (replicas > 1) {
    const int64_t a_replica = layout.a_shared ? 0 : a_one;
    const int64_t b_replica = layout.b_shared ? 0 : b_one;
    if (plan.shared_rhs && layout.b_shared && !plan.a_transposed) {
      rows *= replicas;  // every replica's rows against the one rhs: one taller GEMM
    } else if (batches == 1) {
      batches = replicas;
      stride_a = a_replica;
      stride_b = b_replica;
      stride_c = out_one;
    } else if (!layout.a_shared && !layout.b_shared) {
      batches *= replicas;  // replicas back to back continue the batches' strides
    } else {
      call.calls = static_cast<int>(replicas);
      call.call_stride_a = b_replica;  // cuBLAS's A is the plan's b
      call.call_stride_b = a_replica;
      call.call_stride_c = out_one;
    }
  }
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
  // A transposed operand holds the transpose's input: b as [N, K] row-major, a as [K, rows]
  // (one matrix, so rows is M), each read transposed.
  call.transa = plan.b_transposed;
  call.transb = plan.a_transposed;
  if (plan.b_transposed) call.lda = call.k;
  if (plan.a_transposed) call.ldb = call.n;
  call.stride_a = stride_b;
  call.stride_b = stride_a;
  call.stride_c = stride_c;
  call.batch_count = static_cast<int>(batches);
  return call;
}

GemmCall split_long_sums(GemmCall call, int multiprocessors) {
  if (call.nothing_to_do || call.zero_fill || call.k_split > 1 || call.calls > 1) return call;
  const int64_t product = int64_t{call.ldc} * call.n;  // one batch's outputs, back to back
  if (call.ldc != call.m || (call.batch_count > 1 && call.stride_c != product)) return call;
  const int64_t tiles =
      ceil_div(call.m, kOutputTile) * ceil_div(call.n, kOutputTile) * call.batch_count;
  if (tiles >= multiprocessors) return call;
  const int chunks = chunks_for(call.k, tiles, multiprocessors);
  if (chunks == 1 || !fits_int(int64_t{call.batch_count} * chunks)) return call;
  const int64_t chunk = call.k / chunks;
  call.split_groups = call.batch_count;
  call.group_stride_a = call.stride_a;
  call.group_stride_b = call.stride_b;
  call.batch_count *= chunks;
  call.k = static_cast<int>(chunk);
  call.k_split = chunks;
  // Chunk c reads terms [c x chunk, (c + 1) x chunk): A[i + l*lda] steps by lda along l (by 1
  // when transposed), B[l + j*ldb] by 1 (by ldb when transposed).
  call.stride_a = call.transa ? chunk : chunk * call.lda;
  call.stride_b = call.transb ? chunk * call.ldb : chunk;
  call.stride_c = product;
  return call;
}

}  // namespace tpusim::runtime::gpu
