// A CHAIN of vector steps (isa.proto): the values its steps compute as instructions of their own,
// its timing (ALU steps two a cycle on v3, register values off the VMEM ports), its dump.
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/isa/dump.h"
#include "sim/units/vector_cost.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace vector_chain_test {

using isa::Vector;
namespace vo = vector_ops;

constexpr int kR = 16, kC = 256;  // 4096 elements: 4 vregs of 8 x 128
const isa::Block kA = block(0x0, kR, kC, isa::F32);
const isa::Block kB = block(0x10000, kR, kC, isa::F32);
const isa::Block kRow = block(0x20000, 1, kC, isa::F32);
const isa::Block kT1 = block(0x30000, kR, kC, isa::F32);
const isa::Block kT2 = block(0x40000, kR, kC, isa::F32);
const isa::Block kD = block(0x50000, kR, kC, isa::F32);
const isa::Block kSums = block(0x60000, 1, kC, isa::F32);

// d = round_bf16(relu(a * row + b)), with sum(d) down the rows: the body of a fused batch-norm
// apply, ReLU and its moment, as a chain keeping the intermediates in registers or not.
VectorChain bn_relu_chain(bool in_registers) {
  VectorChain chain;
  chain.add(vo::binary(Vector::MUL, kT1, kA, kRow), in_registers);
  chain.add(vo::binary(Vector::ADD, kT2, kT1, kB), in_registers);
  chain.add(vo::unary(Vector::RELU, kT1, kT2), in_registers);
  chain.add(vo::unary(Vector::ROUND_BF16, kD, kT1));
  chain.add(vo::reduce(Vector::REDUCE_SUM, kSums, kD, 0));
  return chain;
}

class VectorChains : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = testing::make_system();
    testing::put_f32(*system_, CoreId{0}, kA.address(), testing::random_matrix(kR, kC, 1, 2.0f));
    testing::put_f32(*system_, CoreId{0}, kB.address(), testing::random_matrix(kR, kC, 2, 2.0f));
    testing::put_f32(*system_, CoreId{0}, kRow.address(), testing::random_matrix(1, kC, 3));
  }
  // Runs `body`; the cycles, with d and the sums in `d` and `sums`.
  uint64_t run(const std::function<void(CoreBuilder&)>& body, MatrixF* d, MatrixF* sums) {
    isa::Program p;
    CoreBuilder c(&p, 0);
    body(c);
    c.halt();
    auto r = system_->run(p);
    EXPECT_TRUE(r.ok()) << r.status();
    *d = testing::get_f32(*system_, CoreId{0}, kD.address(), kR, kC);
    *sums = testing::get_f32(*system_, CoreId{0}, kSums.address(), 1, kC);
    return r.ok() ? r->cycles() : 0;
  }
  std::unique_ptr<System> system_;
};

TEST_F(VectorChains, ComputeWhatTheirStepsComputeAsInstructions) {
  MatrixF alone_d, alone_sums, chained_d, chained_sums;
  run(
      [](CoreBuilder& c) {
        const VectorChain chain = bn_relu_chain(false);
        for (const Vector& step : chain.instruction().steps()) c.vector(step);
      },
      &alone_d, &alone_sums);
  run([](CoreBuilder& c) { c.vector(bn_relu_chain(true).instruction()); }, &chained_d,
      &chained_sums);
  EXPECT_EQ(chained_d, alone_d);
  EXPECT_EQ(chained_sums, alone_sums);
  EXPECT_GT(alone_sums.cwiseAbs().sum(), 0.0f);
}

// v3: 2 ALUs a slot, 3 VMEM ports of 4096 B a cycle, an 8-cycle pipeline. The chain's ALU steps
// are 5 ops x 4 vregs = 20 vreg operations, 10 issue cycles. In registers it loads a, row and b
// (16 + 1 + 16 KiB) and stores d and the sums (16 + 1 KiB): 50 KiB, 51,200 B over 12,288 B a
// cycle = 4.2 cycles; so 10 + 8 = 18. Through VMEM the three intermediates are stored too (48 KiB
// more, 100 KiB: 8.3 cycles), still under the issue: 18 again. The five as instructions of their
// own: each issues a cycle a vreg (4 + 4 + 4 + 4 + 4 = 20 cycles) and moves its operands and
// result: 20 + 8 = 28.
TEST_F(VectorChains, IssueAluStepsTwoACycleAndLoadEachOperandOnce) {
  const config::CoreSpec& core = system_->slice().chip.core;
  ASSERT_EQ(core.vector_alus, 2u);
  const VectorCost in_registers = vector_cost(bn_relu_chain(true).instruction(), core);
  EXPECT_EQ(in_registers.issue_cycles, 10u);
  EXPECT_EQ(in_registers.vmem_bytes, (16 + 1 + 16 + 16 + 1) * 1024u);
  EXPECT_EQ(in_registers.flop_elements, 5u * kR * kC);  // each step its elements, as alone
  EXPECT_EQ(vector_cost(bn_relu_chain(false).instruction(), core).vmem_bytes,
            (16 + 1 + 16 + 16 + 1 + 3 * 16) * 1024u);
  MatrixF d, sums;
  EXPECT_EQ(run([](CoreBuilder& c) { c.vector(bn_relu_chain(true).instruction()); }, &d, &sums),
            18u);
  EXPECT_EQ(run([](CoreBuilder& c) { c.vector(bn_relu_chain(false).instruction()); }, &d, &sums),
            18u);
  EXPECT_EQ(run(
                [](CoreBuilder& c) {
                  const VectorChain chain = bn_relu_chain(false);
                  for (const Vector& step : chain.instruction().steps()) c.vector(step);
                },
                &d, &sums),
            28u);
}

// A divide and a transcendental do not dual-issue: 4 vregs x 4 cycles each after the ALU steps,
// and the chain pays the transcendental latency (24 on v3).
TEST_F(VectorChains, DividesAndTranscendentalsIssueAtTheirOwnCost) {
  const config::CoreSpec& core = system_->slice().chip.core;
  VectorChain chain;
  chain.add(vo::binary(Vector::ADD, kT1, kA, kB), true);
  chain.add(vo::binary(Vector::DIV, kT2, kT1, kB), true);
  chain.add(vo::unary(Vector::EXP, kD, kT2));
  const VectorCost cost = vector_cost(chain.instruction(), core);
  EXPECT_EQ(cost.issue_cycles, 2u + 16u + 16u);
  EXPECT_TRUE(cost.transcendental);
  MatrixF d, sums;
  EXPECT_EQ(run([&](CoreBuilder& c) { c.vector(chain.instruction()); }, &d, &sums),
            34u + 8u + 24u);
}

// A step that writes part of a block an earlier step loaded or made (not the block itself) makes
// the chain load it again: the values there changed.
TEST(VectorChainCost, APartlyOverwrittenBlockIsLoadedAgain) {
  const auto slice = *config::load_slice("v3-8");  // kept: the core spec lives in it
  const config::CoreSpec& core = slice->chip.core;
  const isa::Block half = block(kA.address(), kR / 2, kC, isa::F32);  // kA's first 8 rows
  VectorChain chain;
  chain.add(vo::unary(Vector::RELU, kT1, kA), true);
  chain.add(vo::unary(Vector::NEG, half, kB));  // stores 8 KiB over kA
  chain.add(vo::binary(Vector::ADD, kD, kA, kT1));
  // Loads: a, b, then a again (16 + 16 + 16 KiB); stores: the half and d (8 + 16 KiB).
  EXPECT_EQ(vector_cost(chain.instruction(), core).vmem_bytes, (16 + 16 + 16 + 8 + 16) * 1024u);
}

TEST(VectorChainDump, ListsTheStepsAndWhatStaysInRegisters) {
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.vector(bn_relu_chain(true).instruction());
  const std::string dump = dump_program(p);
  EXPECT_NE(dump.find("vpu.chain"), std::string::npos) << dump;
  EXPECT_NE(dump.find("vpu.mul: vmem[0x30000: 16x256 f32]"), std::string::npos) << dump;
  EXPECT_NE(dump.find("(in registers); vpu.add"), std::string::npos) << dump;
  EXPECT_NE(dump.find("vpu.reduce_sum: vmem[0x60000"), std::string::npos) << dump;
}

}  // namespace vector_chain_test
}  // namespace tpusim::sim
