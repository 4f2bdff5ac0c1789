#include "runtime/backend/cpu/gemm.h"

#include <algorithm>
#include <cstddef>

#include <Eigen/Core>
#include <omp.h>

#include "runtime/backend/cpu/kernels.h"

namespace tpusim::runtime::cpu {
namespace {

using MatrixMap =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using MutableMap =
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// Products summed by depth blocks keep a wave of block sums until they are added: at most this
// many outputs, so that a wave's sums stay a few MB.
constexpr int64_t kMaxDepthBlockOutputs = 16384;

// A per-thread buffer for patches made on the fly, kept between products (a fresh one per task
// would fault in its pages each time).
std::vector<float>& patch_scratch() {
  thread_local std::vector<float> scratch;
  return scratch;
}

// Eigen's depth block for a product of `rows` x `K` by `K` x `N` into a row-major output: the
// number of terms of each output's sum that it accumulates in registers before adding them to
// the output (its own blocking rule, under fix_gemm_blocking's cache sizes; a row-major product
// is blocked as its transpose).
int64_t eigen_depth_block(int64_t rows, int64_t K, int64_t N) {
  Eigen::Index kc = K, mc = N, nc = rows;
  Eigen::internal::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, Eigen::Index{1});
  return kc;
}

// A product of few outputs and a long depth, such as a convolution's weight gradient ([144,
// 100352] x [100352, 16]), is one task of rows, so it would run on one core. A single Eigen call
// adds each depth block's sum to the output in block order. Here the blocks' sums are computed
// side by side on the host's threads, each block one Eigen call (add_block(first, terms, sum))
// into a buffer of -0 (so the buffer holds the block's sum exactly, a sum of -0 included), then
// added to the zeroed output in block order: the single call's additions, bit for bit
// (CpuBackend.LongDepthsSplitIntoEigensBlocksKeepEveryBit). Worth it from a few blocks a core;
// patches made on the fly (`always`) take this path on any number of threads.
template <typename AddBlock>
bool gemm_depth_blocks(int64_t rows, int64_t K, int64_t N, bool always, float* out,
                       AddBlock add_block) {
  constexpr int64_t kMinBlocksPerThread = 4;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (!depth_blocks_fit(rows, N) || (!always && threads < 2)) return false;
  const int64_t kc = eigen_depth_block(rows, K, N);
  const int64_t blocks = (K + kc - 1) / kc;
  if (!always && blocks < kMinBlocksPerThread * threads) return false;
  // In waves of kWave blocks, each wave's sums added to the output in order before the next:
  // the same additions, in memory bounded by kWave block sums.
  constexpr int64_t kWave = 64;
  std::vector<float> sums(static_cast<size_t>(std::min(blocks, kWave) * rows * N));
  const auto block = [&](int64_t j, int64_t first_of_wave) {
    float* sum = sums.data() + (j - first_of_wave) * rows * N;
    std::fill(sum, sum + rows * N, -0.0f);
    MutableMap block_sum(sum, rows, N);
    add_block(j * kc, std::min(kc, K - j * kc), block_sum);
  };
  std::fill(out, out + rows * N, 0.0f);
  for (int64_t wave = 0; wave < blocks; wave += kWave) {
    const int64_t end = std::min(blocks, wave + kWave);
    if (threads > 1 && end - wave > 1) {
#pragma omp parallel for schedule(static)
      for (int64_t j = wave; j < end; ++j) block(j, wave);
    } else {
      for (int64_t j = wave; j < end; ++j) block(j, wave);
    }
    for (int64_t j = wave; j < end; ++j) {
      const float* sum = sums.data() + (j - wave) * rows * N;
      for (int64_t e = 0; e < rows * N; ++e) out[e] += sum[e];
    }
  }
  return true;
}

// out[rows, N] = a[rows, K] x rhs[K, N], in tasks of kRowsPerTask rows on the host's threads
// (gemm in gemm.h). Eigen packs a transposed operand into the same panels, so its sums are those
// of the transposed copy's, bit for bit (CpuBackend.MatmulsOfTransposesEqualThoseOfTheirCopies);
// patches made a block of rows at a time hold the values the whole tensor would, so they too
// give its sums.
template <typename Rhs>
void gemm_tasks(const LhsSource& a, bool a_transposed, const Rhs& rhs, float* out, int64_t rows,
                int64_t K, int64_t N) {
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  if (a_transposed && (tasks == 1 || a.made_on_the_fly())) {
    // Stored [K, rows]: a depth block is `terms` stored rows.
    const bool split = gemm_depth_blocks(
        rows, K, N, a.made_on_the_fly(), out, [&](int64_t first, int64_t terms, MutableMap& sum) {
          const float* stored = a.rows(first, terms, rows, &patch_scratch());
          sum.noalias() +=
              MatrixMap(stored, terms, rows).transpose() * rhs.middleRows(first, terms);
        });
    if (split) return;
  } else if (tasks == 1 && !a.made_on_the_fly()) {
    const bool split = gemm_depth_blocks(
        rows, K, N, false, out, [&](int64_t first, int64_t terms, MutableMap& sum) {
          sum.noalias() +=
              MatrixMap(a.stored, rows, K).middleCols(first, terms) * rhs.middleRows(first, terms);
        });
    if (split) return;
  }
  const auto task = [&](int64_t t) {
    const int64_t first = t * kRowsPerTask;
    const int64_t count = std::min(kRowsPerTask, rows - first);
    MutableMap block(out + first * N, count, N);
    if (a_transposed) {
      block.noalias() = MatrixMap(a.stored, K, rows).middleCols(first, count).transpose() * rhs;
    } else {
      block.noalias() = MatrixMap(a.rows(first, count, K, &patch_scratch()), count, K) * rhs;
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

}  // namespace

const float* LhsSource::rows(int64_t first, int64_t count, int64_t width,
                             std::vector<float>* scratch) const {
  if (stored != nullptr) return stored + first * width;
  scratch->resize(static_cast<size_t>(count * width));
  write_patch_rows(image, *image_shape, *patches, first, count, scratch->data());
  return scratch->data();
}

bool depth_blocks_fit(int64_t rows, int64_t N) {
  // Eigen computes a product of one output row or column as a matrix-vector product, which adds
  // its partial sums by another rule, and one of fewer than 20 rows, columns and terms
  // coefficient by coefficient; with 2 rows a short last block may be cut into row blocks under
  // Eigen's register panel. A block of such a product would not sum as the whole product does.
  return rows > 2 && N > 1 && rows + N >= 19 && rows * N <= kMaxDepthBlockOutputs;
}

void gemm(const LhsSource& a, bool a_transposed, const float* b, bool b_transposed, float* out,
          int64_t rows, int64_t K, int64_t N) {
  if (b_transposed) {
    gemm_tasks(a, a_transposed, MatrixMap(b, N, K).transpose(), out, rows, K, N);
  } else {
    gemm_tasks(a, a_transposed, MatrixMap(b, K, N), out, rows, K, N);
  }
}

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

}  // namespace tpusim::runtime::cpu
