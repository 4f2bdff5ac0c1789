#include "sim/numerics/reference.h"

#include <random>

#include "sim/numerics/bf16.h"

namespace tpusim::sim {

MatrixF random_uniform(Eigen::Index rows, Eigen::Index cols, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  MatrixF m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}

MatrixF rounded_to_bf16(const MatrixF& m) {
  MatrixF out(m.rows(), m.cols());
  round_to_bf16(m.data(), out.data(), static_cast<size_t>(m.size()));
  return out;
}

double max_rel_error(const MatrixF& got, const MatrixF& ref) {
  const double diff = (got - ref).cwiseAbs().maxCoeff();
  const double scale = ref.cwiseAbs().maxCoeff();
  return scale > 0 ? diff / scale : diff;
}

}  // namespace tpusim::sim
