#pragma once
// The cpu backend's GEMMs: Eigen products cut so that every output's sum is the same on any host
// and any number of threads, spread over the host's threads.

#include <cstdint>
#include <vector>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::cpu {

// A GEMM's lhs as stored, row-major: a tensor's values, or a convolution's patches made on the
// fly from its image, a block of rows at a time, where the product reads them (so that the
// patches, nine times the image for a 3x3 window, never pass through memory whole).
struct LhsSource {
  const float* stored = nullptr;       // the stored values, or null for patches
  const float* image = nullptr;        // patches: the extract_patches node's input, NHWC
  const Shape* image_shape = nullptr;  // its shape
  const Node* patches = nullptr;       // patches: the extract_patches node (window, shape)

  static LhsSource of(const float* values) { return LhsSource{values}; }
  bool made_on_the_fly() const { return stored == nullptr; }
  // Stored rows [first, first + count), `width` values each: in place, or written to `scratch`.
  const float* rows(int64_t first, int64_t count, int64_t width, std::vector<float>* scratch) const;
};

// Rows of A per GEMM task. Fixed, so that how a product is cut never depends on the host's
// threads. Each task packs all of B again: at 64 rows, packing was a fifth of resnet_small's
// step (its convolutions' B are [144, 16] against 100,000 rows); 256 rows of A reuse each packed
// panel four times as long. The rows a task takes do not change a sum: Eigen cuts the depth by
// the L1 size and the depth alone (CpuBackend.MatmulsRoundTheSameOnAnyHost's bits held).
constexpr int64_t kRowsPerTask = 256;

// out[rows, N] = a[rows, K] x b[K, N], a read as stored ([rows, K]) or transposed (stored
// [K, rows]), b likewise ([K, N] or [N, K]). Each task of kRowsPerTask output rows is one
// single-threaded Eigen GEMM blocked by fixed cache sizes (fix_gemm_blocking), so every
// element's sum is cut into the same partial sums on any machine. Patches (LhsSource) are read
// as stored, or transposed where depth_blocks_fit(rows, N).
void gemm(const LhsSource& a, bool a_transposed, const float* b, bool b_transposed, float* out,
          int64_t rows, int64_t K, int64_t N);

// Makes gemm's sums independent of the host (the cpu backend calls it as each loop starts): a
// numerics reference must round the same on every machine. Eigen would otherwise block its
// GEMMs by the host CPU's cache sizes and thread count, and the cpu backend's losses differed
// between an AMD EPYC and an Intel Xeon, and with OMP_NUM_THREADS, from mlp's second step on.
void fix_gemm_blocking();

// Whether a product of `rows` x `N` outputs is summed by depth blocks on the host's threads
// (gemm.cc) when its depth is long: the blocks' sums are kept until they are added in order.
bool depth_blocks_fit(int64_t rows, int64_t N);

}  // namespace tpusim::runtime::cpu
