// MXU numerics against Eigen: bf16 inputs, f32 accumulation, 1 / 3 / 6 passes by precision.
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace mxu_numerics_test {

using testing::make_system;

constexpr int kM = 96, kK = 112, kN = 80;  // not multiples of anything in particular
const isa::Block kLhs = block(0, kM, kK, isa::F32);
const isa::Block kW = block(0x100000, kK, kN, isa::F32);
const isa::Block kOut = block(0x200000, kM, kN, isa::F32);

MatrixF run_matmul(System& system, const MatrixF& a, const MatrixF& w, isa::Precision precision,
                   bool accumulate, const MatrixF* initial = nullptr) {
  testing::put_f32(system, CoreId{0}, kLhs.address(), a);
  testing::put_f32(system, CoreId{0}, kW.address(), w);
  if (initial != nullptr) testing::put_f32(system, CoreId{0}, kOut.address(), *initial);
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.load_weights(1, 1, kW);
  c.matmul(1, 1, kLhs, kOut, accumulate, precision);
  c.halt();
  auto run = system.run(p);
  EXPECT_TRUE(run.ok()) << run.status();
  return testing::get_f32(system, CoreId{0}, kOut.address(), kM, kN);
}

TEST(MxuNumerics, EveryPrecisionAgainstEigen) {
  auto system = make_system();
  const MatrixF a = testing::random_matrix(kM, kK, 1);
  const MatrixF w = testing::random_matrix(kK, kN, 2);
  const MatrixF fp32 = a * w;
  const MatrixF bf16_ref = testing::round_bf16(a) * testing::round_bf16(w);

  const MatrixF d = run_matmul(*system, a, w, isa::DEFAULT, false);
  const MatrixF h = run_matmul(*system, a, w, isa::HIGH, false);
  const MatrixF x = run_matmul(*system, a, w, isa::HIGHEST, false);

  // DEFAULT is one bf16 pass: the f32 GEMM of the rounded inputs, up to summation order.
  EXPECT_LT(testing::max_rel_error(d, bf16_ref), 1e-6f);
  // ...and about bf16's epsilon (2^-8) x sqrt(K) away from the f32 answer.
  const float default_err = testing::max_rel_error(d, fp32);
  EXPECT_GT(default_err, 1e-4f);
  EXPECT_LT(default_err, 2e-2f);
  // HIGH (bf16x3) is within ~2^-16, HIGHEST (bf16x6) within f32 rounding of the f32 answer.
  const float high_err = testing::max_rel_error(h, fp32);
  const float highest_err = testing::max_rel_error(x, fp32);
  EXPECT_LT(high_err, 1e-4f);
  EXPECT_LT(highest_err, 1e-6f);
  EXPECT_LT(high_err, default_err / 50);
  EXPECT_LE(highest_err, high_err);
}

TEST(MxuNumerics, BfloatInputsInVmemAreUsedAsTheyAre) {
  auto system = make_system();
  const MatrixF a = testing::random_matrix(kM, kK, 5);
  const MatrixF w = testing::random_matrix(kK, kN, 6);
  // Store bf16 copies in VMEM and multiply them.
  std::vector<uint16_t> a16(a.size()), w16(w.size());
  for (Eigen::Index i = 0; i < a.size(); ++i) a16[i] = f32_to_bf16_bits(a.data()[i]);
  for (Eigen::Index i = 0; i < w.size(); ++i) w16[i] = f32_to_bf16_bits(w.data()[i]);
  ASSERT_TRUE(system->write_vmem(CoreId{0}, 0, a16.data(), 2 * a16.size()).ok());
  ASSERT_TRUE(system->write_vmem(CoreId{0}, 0x100000, w16.data(), 2 * w16.size()).ok());
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.load_weights(0, 0, block(0x100000, kK, kN, isa::BF16));
  c.matmul(0, 0, block(0, kM, kK, isa::BF16), kOut, false);
  c.halt();
  ASSERT_TRUE(system->run(p).ok());
  const MatrixF got = testing::get_f32(*system, CoreId{0}, kOut.address(), kM, kN);
  EXPECT_LT(testing::max_rel_error(got, testing::round_bf16(a) * testing::round_bf16(w)), 1e-6f);
}

TEST(MxuNumerics, AccumulateAddsToWhatIsThere) {
  auto system = make_system();
  const MatrixF a = testing::random_matrix(kM, kK, 3);
  const MatrixF w = testing::random_matrix(kK, kN, 4);
  const MatrixF initial = testing::random_matrix(kM, kN, 9, 10.0f);
  const MatrixF got = run_matmul(*system, a, w, isa::DEFAULT, true, &initial);
  const MatrixF ref = initial + testing::round_bf16(a) * testing::round_bf16(w);
  EXPECT_LT(testing::max_rel_error(got, ref), 1e-6f);
}

// The same program on the same inputs gives the same bits, run after run.
TEST(MxuNumerics, RunsAreBitwiseReproducible) {
  auto system = make_system();
  const MatrixF a = testing::random_matrix(kM, kK, 7);
  const MatrixF w = testing::random_matrix(kK, kN, 8);
  const MatrixF first = run_matmul(*system, a, w, isa::HIGHEST, false);
  for (int i = 0; i < 3; ++i) {
    const MatrixF again = run_matmul(*system, a, w, isa::HIGHEST, false);
    ASSERT_EQ(std::memcmp(first.data(), again.data(), sizeof(float) * first.size()), 0)
        << "run " << i;
  }
}

// A grouped matmul (isa.proto, Matmul.groups) is its groups' products one after the other: here
// every other row of a 96-row block (a strided view, as a convolution's windows at stride 2)
// times the weights into the rows of 6 groups of 8, 16 rows apart in the output, the rows
// between them untouched.
TEST(MxuNumerics, GroupedMatmulMultipliesEachGroupWhereItLies) {
  auto system = make_system();
  const MatrixF a = testing::random_matrix(kM, kK, 11);
  const MatrixF w = testing::random_matrix(kK, kN, 12);
  const MatrixF initial = testing::random_matrix(kM, kN, 13);
  testing::put_f32(*system, CoreId{0}, kLhs.address(), a);
  testing::put_f32(*system, CoreId{0}, kW.address(), w);
  testing::put_f32(*system, CoreId{0}, kOut.address(), initial);
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.load_weights(0, 0, kW);
  // Group g: lhs rows 16g, 16g + 2, ..., 16g + 14 into out rows 16g .. 16g + 7.
  const uint64_t row = kK * 4, out_row = kN * 4;
  c.grouped_matmul(0, 0, block(0, 8, kK, isa::F32, 2 * row), block(kOut.address(), 8, kN, isa::F32),
                   6, 16 * row, 16 * out_row, false);
  c.halt();
  ASSERT_TRUE(system->run(p).ok());
  const MatrixF got = testing::get_f32(*system, CoreId{0}, kOut.address(), kM, kN);
  const MatrixF product = testing::round_bf16(a) * testing::round_bf16(w);
  for (int r = 0; r < kM; ++r) {
    const bool written = r % 16 < 8;
    const MatrixF want =
        written ? MatrixF(product.row(16 * (r / 16) + 2 * (r % 16))) : MatrixF(initial.row(r));
    EXPECT_LT(testing::max_rel_error(got.row(r), want), 1e-6f) << "row " << r;
  }
}

// Timing-only runs take the same cycles and leave memory untouched.
TEST(MxuNumerics, TimingOnlyLeavesMemoryAlone) {
  auto system = make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  const MatrixF a = testing::random_matrix(kM, kK, 1);
  const MatrixF w = testing::random_matrix(kK, kN, 2);
  const MatrixF zeros = MatrixF::Zero(kM, kN);
  const MatrixF got = run_matmul(*system, a, w, isa::DEFAULT, false, &zeros);
  EXPECT_EQ(got, zeros);
}

}  // namespace mxu_numerics_test
}  // namespace tpusim::sim
