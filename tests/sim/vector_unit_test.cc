// The vector unit's numerics (against Eigen, f32) and timing (vregs x cost + latency).
#include "sim/units/vector_unit.h"

#include <cmath>

#include <gtest/gtest.h>

#include "sim/numerics/random.h"
#include "tests/sim/convert_cases.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace vector_unit_test {

using testing::make_system;

constexpr int kR = 16, kC = 256;
const isa::Block kA = block(0x0, kR, kC, isa::F32);
const isa::Block kB = block(0x10000, kR, kC, isa::F32);
const isa::Block kRow = block(0x20000, 1, kC, isa::F32);
const isa::Block kCol = block(0x30000, kR, 1, isa::F32);
const isa::Block kD = block(0x40000, kR, kC, isa::F32);

class VectorOps : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = make_system();
    a_ = testing::random_matrix(kR, kC, 1, 2.0f);
    b_ = testing::random_matrix(kR, kC, 2, 2.0f);
    row_ = testing::random_matrix(1, kC, 3);
    col_ = testing::random_matrix(kR, 1, 4);
    testing::put_f32(*system_, CoreId{0}, kA.address(), a_);
    testing::put_f32(*system_, CoreId{0}, kB.address(), b_);
    testing::put_f32(*system_, CoreId{0}, kRow.address(), row_);
    testing::put_f32(*system_, CoreId{0}, kCol.address(), col_);
  }
  MatrixF run(const std::function<void(CoreBuilder&)>& body, const isa::Block& out) {
    isa::Program p;
    CoreBuilder c(&p, 0);
    body(c);
    c.halt();
    auto r = system_->run(p);
    EXPECT_TRUE(r.ok()) << r.status();
    return testing::get_f32(*system_, CoreId{0}, out.address(), static_cast<int>(out.rows()),
                            static_cast<int>(out.cols()));
  }
  std::unique_ptr<System> system_;
  MatrixF a_, b_, row_, col_;
};

TEST_F(VectorOps, BinaryWithBroadcastsAndScalars) {
  EXPECT_EQ(run([](CoreBuilder& c) { c.binary(isa::Vector::ADD, kD, kA, kB); }, kD),
            MatrixF(a_ + b_));
  EXPECT_EQ(run([](CoreBuilder& c) { c.binary(isa::Vector::MUL, kD, kA, kRow); }, kD),
            MatrixF(a_.array() * row_.replicate(kR, 1).array()));
  EXPECT_EQ(run([](CoreBuilder& c) { c.binary(isa::Vector::SUB, kD, kA, kCol); }, kD),
            MatrixF(a_.array() - col_.replicate(1, kC).array()));
  EXPECT_EQ(run([](CoreBuilder& c) { c.binary_scalar(isa::Vector::MAX, kD, kA, 0.5f); }, kD),
            MatrixF(a_.array().max(0.5f)));
  EXPECT_EQ(run([](CoreBuilder& c) { c.binary(isa::Vector::DIV, kD, kA, kB); }, kD),
            MatrixF(a_.array() / b_.array()));
  EXPECT_EQ(run([](CoreBuilder& c) { c.binary(isa::Vector::CMP_GT, kD, kA, kB); }, kD),
            MatrixF((a_.array() > b_.array()).cast<float>()));
}

TEST_F(VectorOps, UnaryAndTranscendentals) {
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::RELU, kD, kA); }, kD),
            MatrixF(a_.array().max(0.0f)));
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::EXP, kD, kA); }, kD),
            MatrixF(a_.array().exp()));
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::TANH, kD, kA); }, kD),
            MatrixF(a_.array().tanh()));
  const MatrixF pos = a_.array().abs() + 0.1f;
  testing::put_f32(*system_, CoreId{0}, kB.address(), pos);
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::LOG, kD, kB); }, kD),
            MatrixF(pos.array().log()));
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::RSQRT, kD, kB); }, kD),
            MatrixF(pos.array().rsqrt()));
  // erf is the host's erff, bit for bit (what the cpu backend computes too).
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::ERF, kD, kA); }, kD),
            MatrixF(a_.unaryExpr([](float x) { return std::erf(x); })));
}

TEST_F(VectorOps, SelectReduceTransposeBroadcastFill) {
  const MatrixF mask = (a_.array() > 0).cast<float>();
  testing::put_f32(*system_, CoreId{0}, 0x50000, mask);
  const isa::Block m = block(0x50000, kR, kC, isa::F32);
  EXPECT_EQ(run([&](CoreBuilder& c) { c.select(kD, m, kA, kB); }, kD),
            MatrixF((mask.array() != 0).select(a_, b_)));
  const isa::Block sums = block(0x60000, 1, kC, isa::F32);
  EXPECT_EQ(run([&](CoreBuilder& c) { c.reduce(isa::Vector::REDUCE_SUM, sums, kA, 0); }, sums),
            MatrixF(a_.colwise().sum()));
  const isa::Block maxes = block(0x60000, kR, 1, isa::F32);
  EXPECT_EQ(run([&](CoreBuilder& c) { c.reduce(isa::Vector::REDUCE_MAX, maxes, kA, 1); }, maxes),
            MatrixF(a_.rowwise().maxCoeff()));
  const isa::Block t = block(0x70000, kC, kR, isa::F32);
  EXPECT_EQ(run([&](CoreBuilder& c) { c.transpose(t, kA); }, t), MatrixF(a_.transpose()));
  EXPECT_EQ(run([&](CoreBuilder& c) { c.broadcast(kD, kRow); }, kD),
            MatrixF(row_.replicate(kR, 1)));
  EXPECT_EQ(run([&](CoreBuilder& c) { c.fill(kD, 3.5f); }, kD), MatrixF::Constant(kR, kC, 3.5f));
}

TEST_F(VectorOps, CastRoundsToBf16AndBack) {
  const isa::Block half = block(0x80000, kR, kC, isa::BF16);
  const MatrixF got = run(
      [&](CoreBuilder& c) {
        const uint32_t f = c.new_flag();
        c.cast(half, kA).signal(f);
        c.cast(kD, half).wait(f, 1);
      },
      kD);
  EXPECT_EQ(got, testing::round_bf16(a_));
}

// ROUND_BF16 is the two casts in one op, in place too: nearest even, ties included (1 + 2^-8 lies
// halfway between 1 and 1 + 2^-7 and goes to the even 1).
TEST_F(VectorOps, RoundBf16IsTheCastsThereAndBackInOneOp) {
  EXPECT_EQ(run([](CoreBuilder& c) { c.unary(isa::Vector::ROUND_BF16, kD, kA); }, kD),
            testing::round_bf16(a_));
  MatrixF ties = MatrixF::Constant(kR, kC, 1.0f + 1.0f / 256);
  ties(0, 1) = 1.0f + 3.0f / 256;  // halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6
  testing::put_f32(*system_, CoreId{0}, kB.address(), ties);
  const MatrixF got = run([](CoreBuilder& c) { c.unary(isa::Vector::ROUND_BF16, kB, kB); }, kB);
  EXPECT_EQ(got(0, 0), 1.0f);
  EXPECT_EQ(got(0, 1), 1.0f + 1.0f / 64);
}

TEST_F(VectorOps, CastToS32IsXlasConversion) {
  const auto& cases = testing::kF32ToS32Cases;
  const auto count = static_cast<uint32_t>(std::size(cases));
  const isa::Block in = block(0x90000, 1, count, isa::F32);
  const isa::Block out = block(0x98000, 1, count, isa::S32);
  MatrixF values(1, count);
  for (uint32_t i = 0; i < count; ++i) values(0, i) = cases[i].in;
  testing::put_f32(*system_, CoreId{0}, in.address(), values);
  run([&](CoreBuilder& c) { c.cast(out, in); }, kD);
  std::vector<int32_t> got(count);
  ASSERT_TRUE(
      system_->read_vmem(CoreId{0}, out.address(), got.data(), sizeof(int32_t) * count).ok());
  for (uint32_t i = 0; i < count; ++i) EXPECT_EQ(got[i], cases[i].out) << cases[i].in;
}

TEST_F(VectorOps, RngUniformFollowsTheStepCounter) {
  isa::Program p;
  p.set_step_base(5);
  CoreBuilder c(&p, 0);
  const uint32_t f = c.new_flag();
  c.loop(2, [&] {
    c.fill(kD, 0).instruction().mutable_vector()->set_op(isa::Vector::RNG_UNIFORM);
    c.instruction_back()->mutable_vector()->set_seed(99);
    c.instruction_back()->mutable_vector()->set_index_base(1000);
    c.instruction_back()->add_signal(f);
    c.outfeed(kD).wait(f, 1);
  });
  c.halt();
  ASSERT_TRUE(system_->run(p).ok());
  const auto out = system_->take_outfeed(CoreId{0});
  ASSERT_EQ(out.size(), 2u);
  for (uint64_t step = 0; step < 2; ++step) {
    const float* values = reinterpret_cast<const float*>(out[step].data.data());
    for (uint64_t i = 0; i < static_cast<uint64_t>(kR) * kC; i += 97) {
      EXPECT_EQ(values[i], counter_uniform(99, 5 + step, 1000 + i)) << step << " " << i;
    }
  }
}

TEST_F(VectorOps, CastToAndFromS32) {
  const isa::Block ints = block(0x90000, kR, kC, isa::S32);
  const MatrixF got = run(
      [&](CoreBuilder& c) {
        const uint32_t f = c.new_flag();
        c.cast(ints, kA).signal(f);
        c.cast(kD, ints).wait(f, 1);
      },
      kD);
  EXPECT_EQ(got, MatrixF((a_ * 1.0f).array().unaryExpr([](float v) { return std::trunc(v); })));
}

// 16 x 256 = 4096 elements = 4 vregs of 8 x 128. add: 4 issue cycles; VMEM moves 3 x 16 KiB
// = 48 KiB at 3 x 4096 B/cycle = 4 cycles; the result is out after the 8-cycle pipeline:
// issued at 0, 4 + 8 = 12. exp costs 4 cycles per vreg and 24 more latency: 16 + 8 + 24 = 48.
TEST_F(VectorOps, TimingIsVregsTimesCostPlusLatency) {
  const auto& core = system_->slice().chip.core;
  isa::Instruction add;
  add.mutable_vector()->set_op(isa::Vector::ADD);
  *add.mutable_vector()->mutable_dst() = kD;
  EXPECT_EQ(vector_issue_cycles(add.vector(), core), 4u);
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.binary(isa::Vector::ADD, kD, kA, kB);
  c.halt();
  auto r = system_->run(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cycles(), 12u);
  isa::Program q;
  CoreBuilder e(&q, 0);
  e.unary(isa::Vector::EXP, kD, kA);
  e.halt();
  r = system_->run(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cycles(), 48u);
  // erf takes the transcendental path too: exp's cost and latency.
  isa::Program s;
  CoreBuilder f(&s, 0);
  f.unary(isa::Vector::ERF, kD, kA);
  f.halt();
  r = system_->run(s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cycles(), 48u);
}

}  // namespace vector_unit_test
}  // namespace tpusim::sim

namespace tpusim::sim {
namespace vector_unit_test {

// A 1 x 1 block broadcasts along whichever dimension the destination has.
TEST(VectorBroadcast, OneByOneFillsRowsAndColumns) {
  auto system = testing::make_system();
  const float v = 2.5f;
  ASSERT_TRUE(system->write_vmem(CoreId{0}, 0, &v, 4).ok());
  isa::Program p;
  CoreBuilder c(&p, 0);
  const uint32_t f = c.new_flag();
  c.broadcast(block(0x1000, 1, 7, isa::F32), block(0, 1, 1, isa::F32)).signal(f);
  c.broadcast(block(0x2000, 5, 1, isa::F32), block(0, 1, 1, isa::F32)).signal(f);
  c.fill(block(0x3000, 1, 1, isa::F32), 0).wait(f, 2);
  c.halt();
  ASSERT_TRUE(system->run(p).ok());
  EXPECT_EQ(testing::get_f32(*system, CoreId{0}, 0x1000, 1, 7), MatrixF::Constant(1, 7, v));
  EXPECT_EQ(testing::get_f32(*system, CoreId{0}, 0x2000, 5, 1), MatrixF::Constant(5, 1, v));
}

}  // namespace vector_unit_test
}  // namespace tpusim::sim
