#include <Eigen/Core>

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
}  // namespace

// [..., M, K] x [..., K, N] (or x [K, N]): one Eigen GEMM per batch element. With the mxu
// policy the inputs are rounded to bf16 first; products of bf16 values are exact in f32 and
// the sums accumulate in f32, as on the MXU.
HostTensor matmul(const Node& n, const Inputs& in, const KernelContext& ctx) {
  const HostTensor& a = *in[0];
  const HostTensor& b = *in[1];
  const int ra = a.shape.rank(), rb = b.shape.rank();
  const int64_t M = a.shape.dim(ra - 2), K = a.shape.dim(ra - 1), N = b.shape.dim(rb - 1);
  const int64_t batches = a.shape.elements() / (M * K);
  const bool shared_rhs = rb == 2;
  std::vector<float> sa, sb;
  const float* pa = maybe_rounded(a, ctx.mxu_precision, &sa);
  const float* pb = maybe_rounded(b, ctx.mxu_precision, &sb);
  HostTensor out = HostTensor::zeros(n.dtype, n.shape);
  if (shared_rhs) {
    // All batches share the rhs: one GEMM over (batches x M) rows.
    MutableMap(out.f.data(), batches * M, N).noalias() =
        MatrixMap(pa, batches * M, K) * MatrixMap(pb, K, N);
  } else {
    for (int64_t i = 0; i < batches; ++i) {
      MutableMap(out.f.data() + i * M * N, M, N).noalias() =
          MatrixMap(pa + i * M * K, M, K) * MatrixMap(pb + i * K * N, K, N);
    }
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

}  // namespace tpusim::runtime::cpu
