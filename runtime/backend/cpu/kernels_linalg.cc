#include <algorithm>
#include <cstddef>

#include <Eigen/Core>

#include "runtime/backend/cpu/buffers.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/element_math.h"

namespace tpusim::runtime::cpu {

namespace {
using MatrixMap =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using MutableMap =
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

const float* maybe_rounded(const HostTensor& t, bool round, std::vector<float>* scratch) {
  if (!round) return t.f.data();
  scratch->resize(t.f.size());
  for (size_t i = 0; i < t.f.size(); ++i) (*scratch)[i] = element::round_to_bf16(t.f[i]);
  return scratch->data();
}

// Rows of A per GEMM task. Fixed, so that how a product is cut never depends on the host's
// threads. Each task packs all of B again: at 64 rows, packing was a fifth of resnet_small's
// step (its convolutions' B are [144, 16] against 100,000 rows); 256 rows of A reuse each packed
// panel four times as long. The rows a task takes do not change a sum: Eigen cuts the depth by
// the L1 size and the depth alone (CpuBackend.MatmulsRoundTheSameOnAnyHost's bits held).
constexpr int64_t kRowsPerTask = 256;

// out[rows, N] = a[rows, K] x rhs[K, N], in tasks of kRowsPerTask rows on the host's threads,
// a read as stored ([rows, K]) or transposed (stored [K, rows]). Each task is a single-threaded
// Eigen GEMM blocked by fixed cache sizes (fix_gemm_blocking), so every element's sum is cut
// into the same partial sums on any machine; Eigen packs a transposed operand into the same
// panels, so its sums are those of the transposed copy's, bit for bit
// (CpuBackend.MatmulsOfTransposesEqualThoseOfTheirCopies).
template <typename Rhs>
void gemm_tasks(const float* a, bool a_transposed, const Rhs& rhs, float* out, int64_t rows,
                int64_t K, int64_t N) {
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  const auto task = [&](int64_t t) {
    const int64_t first = t * kRowsPerTask;
    const int64_t count = std::min(kRowsPerTask, rows - first);
    MutableMap block(out + first * N, count, N);
    if (a_transposed) {
      block.noalias() = MatrixMap(a, K, rows).middleCols(first, count).transpose() * rhs;
    } else {
      block.noalias() = MatrixMap(a + first * K, count, K) * rhs;
    }
  };
  // No parallel region at all where one task or a small product would make a team of one: a
  // batched matmul's products run inside its own region, and a nested one costs libgomp a team
  // (malloc and futex calls) per product.
  if (tasks == 1 || rows * K * N <= (int64_t{1} << 18)) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) task(t);
}

void gemm(const float* a, bool a_transposed, const float* b, bool b_transposed, float* out,
          int64_t rows, int64_t K, int64_t N) {
  if (b_transposed) {
    gemm_tasks(a, a_transposed, MatrixMap(b, N, K).transpose(), out, rows, K, N);
  } else {
    gemm_tasks(a, a_transposed, MatrixMap(b, K, N), out, rows, K, N);
  }
}
}  // namespace

void fix_gemm_blocking() {
  // Eigen's depth blocking (where a long dot product's partial sums are added) follows the L1
  // size it reads from the host CPU, and a multi-threaded GEMM blocks by another rule than a
  // single-threaded one; the cpu backend's products must round the same everywhere. Both
  // settings are process-wide, so they are checked at every loop, not once per process: a
  // program (or test) that set its own after a cpu backend's first loop would otherwise change
  // the next loop's bits. Written only when they differ, so concurrent loops of two backends
  // only read them. tpusim's MXU tiles (at most 128 deep, one block under either rule) keep
  // their values, and its steps took as long after a cpu backend as before (compare
  // --backends cpu,tpusim on mnist_cnn: 1.5-1.7 s for 4 steps either way round).
  constexpr std::ptrdiff_t kL1 = 32 << 10, kL2 = 1 << 20, kL3 = 32 << 20;
  if (Eigen::l1CacheSize() != kL1 || Eigen::l2CacheSize() != kL2 || Eigen::l3CacheSize() != kL3)
    Eigen::setCpuCacheSizes(kL1, kL2, kL3);
  if (Eigen::nbThreads() != 1) Eigen::setNbThreads(1);
}

// [..., M, K] x [..., K, N] (or x [K, N]): one Eigen GEMM per batch element. With the mxu
// policy the inputs are rounded to bf16 first; products of bf16 values are exact in f32 and
// the sums accumulate in f32, as on the MXU. An operand marked transposed holds the transpose's
// input ([..., K, M] for a, [..., N, K] for b), read in place.
HostTensor matmul(const Node& n, const Inputs& in, const KernelContext& ctx,
                  MatmulOperands operands) {
  const HostTensor& a = *in[0];
  const HostTensor& b = *in[1];
  const int r = n.shape.rank(), rb = b.shape.rank();
  const int64_t M = n.shape.dim(r - 2), N = n.shape.dim(r - 1);
  const int64_t K = operands.a_transposed ? a.shape.dim(r - 2) : a.shape.dim(r - 1);
  const int64_t batches = a.shape.elements() / (M * K);
  std::vector<float> sa, sb;
  const float* pa = maybe_rounded(a, ctx.mxu_precision, &sa);
  const float* pb = maybe_rounded(b, ctx.mxu_precision, &sb);
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  if (rb == 2 && !operands.a_transposed) {
    // All batches share the rhs: one GEMM over (batches x M) rows.
    gemm(pa, false, pb, operands.b_transposed, out.f.data(), batches * M, K, N);
  } else {
    // Products of at most one task's rows each (attention's, 28 x 16 x 28) run side by side on
    // the host's threads, each a whole single-threaded GEMM as before.
    const int64_t b_stride = rb == 2 ? 0 : K * N;
#pragma omp parallel for schedule(static) if (batches > 1 && M <= kRowsPerTask)
    for (int64_t i = 0; i < batches; ++i)
      gemm(pa + i * M * K, operands.a_transposed, pb + i * b_stride, operands.b_transposed,
           out.f.data() + i * M * N, M, K, N);
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

}  // namespace tpusim::runtime::cpu
