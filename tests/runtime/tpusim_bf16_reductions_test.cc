// A bf16 reduction rounds its f32 sums in VMEM inside its own fragment, as XLA fuses the convert
// into the reduction, instead of writing them and rounding them in a pass of its own.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/opcheck/harness.h"
#include "sim/isa/ops.h"
#include "sim/memory/block.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_bf16_reductions_test {

using testing::run_once;
using testing::run_once_on;

// bf16 sums of every kind of reduction fragment: down the rows of a long input (one pipelined
// pass), along the last axis, over a middle axis (slices combined), and two fused with the
// elementwise group computing their input (a batch-norm-gradient-like pair of sums of g and
// g x). No reduction fragment reads back what it wrote (a rounding pass would), each has a
// ROUND_BF16 of its own, and every value is a bf16 value (its low 16 bits clear) within a bf16
// rounding of the cpu backend's (which sums in another order).
TEST(TpusimBackend, Bf16ReductionsRoundTheirSumsInTheirOwnFragment) {
  GraphBuilder b;
  const Value x = b.cast(b.infeed("x", DType::kF32, {4096, 256}), DType::kBF16);
  const Value g = b.cast(b.infeed("g", DType::kF32, {4096, 256}), DType::kBF16);
  b.output("down", b.reduce(Op::kReduceSum, x, {0}));
  b.output("along", b.reduce(Op::kReduceSum, x, {1}));
  b.output("middle", b.reduce(Op::kReduceSum, b.reshape(x, {64, 64, 256}), {1}));
  b.output("sum_g", b.reduce(Op::kReduceSum, g, {0}));
  b.output("sum_gx", b.reduce(Op::kReduceSum, b.binary(Op::kMul, g, x), {0}));
  ASSERT_TRUE(b.status().ok()) << b.status();

  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  const isa::CoreProgram& core = (*step->program).cores(0);
  // Per reduction origin: the HBM its fragment wrote, what it read, whether it rounded.
  struct Seen {
    std::vector<std::pair<uint64_t, uint64_t>> wrote, read;
    bool rounded = false;
  };
  std::map<uint32_t, Seen> seen;
  for (const isa::Instruction& i : core.instructions()) {
    if (i.origin() == 0) continue;
    const std::string& op = core.origins(static_cast<int>(i.origin()) - 1).op();
    if (op != "reduce_sum" && op != "fused") continue;
    Seen& s = seen[i.origin()];
    if (i.has_vector() && i.vector().op() == isa::Vector::ROUND_BF16) s.rounded = true;
    if (!i.has_dma()) continue;
    const bool in = i.dma().direction() == isa::Dma::HBM_TO_VMEM;
    const isa::Block& hbm = in ? i.dma().src() : i.dma().dst();
    (in ? s.read : s.wrote).emplace_back(hbm.address(), sim::end_address(hbm));
  }
  int reductions = 0;
  for (const auto& [origin, s] : seen) {
    if (s.wrote.empty()) continue;
    ++reductions;
    EXPECT_TRUE(s.rounded) << core.origins(static_cast<int>(origin) - 1).label();
    for (const auto& [lo, hi] : s.read) {
      for (const auto& [wlo, whi] : s.wrote) {
        EXPECT_FALSE(lo < whi && wlo < hi)
            << core.origins(static_cast<int>(origin) - 1).label() << " reads back what it wrote";
      }
    }
  }
  EXPECT_GE(reductions, 4);  // the sibling sums share a fragment

  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {4096, 256}}, {"g", DType::kF32, {4096, 256}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 3)};
  const Outputs tpusim = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs cpu = run_once_on("cpu", b.graph(), CompileOptions{}, feeds);
  ASSERT_EQ(tpusim.size(), 5u);
  for (const auto& [name, value] : cpu) {
    const std::vector<float>& t = tpusim.at(name).f;
    ASSERT_EQ(t.size(), value.f.size()) << name;
    float scale = 0;
    for (float v : value.f) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < t.size(); ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, &t[i], 4);
      EXPECT_EQ(bits & 0xffffu, 0u) << name << "[" << i << "]";
      EXPECT_NEAR(t[i], value.f[i], scale / 128) << name << "[" << i << "]";
    }
  }
}

}  // namespace tpusim_bf16_reductions_test
}  // namespace tpusim::runtime
