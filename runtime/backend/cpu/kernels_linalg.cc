#include <algorithm>
#include <cstddef>
#include <vector>

#include "runtime/backend/cpu/buffers.h"
#include "runtime/backend/cpu/gemm.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/element_math.h"

namespace tpusim::runtime::cpu {

namespace {

const float* maybe_rounded(const HostTensor& t, bool round, std::vector<float>* scratch) {
  if (!round) return t.f.data();
  scratch->resize(t.f.size());
  for (size_t i = 0; i < t.f.size(); ++i) (*scratch)[i] = element::round_to_bf16(t.f[i]);
  return scratch->data();
}

}  // namespace

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
  // The lhs as stored: patches (the extract_patches node's shape, flattened to rank 2 where
  // read transposed) or the tensor itself.
  const Shape& stored = operands.a_patches != nullptr ? operands.a_patches->shape : a.shape;
  const int64_t K = !operands.a_transposed          ? stored.dim(stored.rank() - 1)
                    : operands.a_patches != nullptr ? stored.elements() / M
                                                    : stored.dim(r - 2);
  const int64_t batches = stored.elements() / (M * K);
  std::vector<float> sa, sb;
  const float* pa = maybe_rounded(a, ctx.mxu_precision, &sa);
  const float* pb = maybe_rounded(b, ctx.mxu_precision, &sb);
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  if (operands.a_patches != nullptr) {
    const LhsSource patches{nullptr, pa, &a.shape, operands.a_patches};
    gemm(patches, operands.a_transposed, pb, operands.b_transposed, out.f.data(), batches * M, K,
         N);
  } else if (rb == 2 && !operands.a_transposed) {
    // All batches share the rhs: one GEMM over (batches x M) rows.
    gemm(LhsSource::of(pa), false, pb, operands.b_transposed, out.f.data(), batches * M, K, N);
  } else {
    const int64_t b_stride = rb == 2 ? 0 : K * N;
    const auto product = [&](int64_t i) {
      gemm(LhsSource::of(pa + i * M * K), operands.a_transposed, pb + i * b_stride,
           operands.b_transposed, out.f.data() + i * M * N, M, K, N);
    };
    if (batches == 1 || M > kRowsPerTask) {
      // Each product spreads its own tasks or depth blocks over the threads. Not inside an
      // inactive parallel region (an `if` clause that is false): libgomp would start a nested
      // team, new threads, for each of them (3.4 ms for a 64 x 3584 x 64 weight gradient).
      for (int64_t i = 0; i < batches; ++i) product(i);
    } else {
      // Products of at most one task's rows each (attention's, 28 x 16 x 28) run side by side
      // on the host's threads, each a whole single-threaded GEMM.
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < batches; ++i) product(i);
    }
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

}  // namespace tpusim::runtime::cpu
