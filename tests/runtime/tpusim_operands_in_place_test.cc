// Operands and values the tpusim compiler reads or writes where they lie instead of through
// copies in HBM compute what the cpu backend computes: computed scalars as 1x1 operands, a mask
// broadcast over heads and queries a row at a time, an rng drawn in the tiles of the group that
// reads it, and updates written into their variables.
#include <cstring>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/initializers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/program_counts.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace {

using testing::run_once;

// A computed scalar read as a 1x1 operand (broadcast by the vector ops, never materialised)
// gives what the cpu backend computes, bit for bit: the ops are single f32 multiplies, divides
// and adds, and the scalar a maximum (no summation order). As the first operand of a binary op
// and the second, in a select, through an explicit broadcast, and in a reduction's input.
TEST(TpusimBackend, ScalarOperandsComputeWhatTheCpuDoes) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 40});
  const Value y = b.infeed("y", DType::kF32, {64});
  const Value s = b.reduce(Op::kReduceMax, y, {0});
  const Value wide = b.broadcast(s, x.shape(), {});
  b.output("products", s * x + x / s);
  b.output("selected", b.select(b.binary(Op::kGreater, x, wide), wide, x));
  b.output("row_sums", b.reduce(Op::kReduceMax, x * s, {1}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {300, 40}}, {"y", DType::kF32, {64}}};
  testing::expect_the_cpus_bits(b.graph(), {opcheck::make_feeds(c, 7)}, 3);
}

// An operand broadcast over middle dims ([batch, 1, 1, keys] over heads and queries, as BERT's
// attention mask) is read a row per period of rows, the group emitted period by period, never
// materialised at the output's shape: the values are the cpu's bit for bit, and the step moves
// the scores' bytes four times (infeed, the group's read and write, outfeed) and the mask's rows,
// where a materialised mask would add two passes (its temporary written and read back). With a
// dropout's draws in the group too, each period's tiles draw at their own rows (the cpu's values).
TEST(TpusimBackend, MasksBroadcastOverHeadsAndQueriesAreReadARowAtATime) {
  GraphBuilder b;
  const Value scores = b.infeed("scores", DType::kF32, {3, 4, 40, 24});
  const Value mask = b.infeed("mask", DType::kF32, {3, 1, 1, 24});
  b.output("masked", scores * 0.125f + mask);
  ASSERT_TRUE(b.status().ok()) << b.status();
  // The same with a dropout's draws in the group: each period's tiles draw at their own rows.
  GraphBuilder dropped;
  const Value s2 = dropped.infeed("scores", DType::kF32, {3, 4, 40, 24});
  const Value keep =
      dropped.binary(Op::kGreater, dropped.rng_uniform(s2.shape(), 5), dropped.scalar(0.5f));
  dropped.output("masked", s2 * keep + dropped.infeed("mask", DType::kF32, {3, 1, 1, 24}));
  ASSERT_TRUE(dropped.status().ok()) << dropped.status();
  opcheck::OpCase c;
  c.inputs = {{"scores", DType::kF32, {3, 4, 40, 24}}, {"mask", DType::kF32, {3, 1, 1, 24}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 11)};
  testing::expect_the_cpus_bits(b.graph(), feeds, 1);
  testing::expect_the_cpus_bits(dropped.graph(), feeds, 1);
  const auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  const config::SliceSpec& v3 = **slice;
  auto step = tpusim_backend::compile_graph(b.graph(), v3, 0);
  ASSERT_TRUE(step.ok()) << step.status();
  const uint64_t scores_bytes = 3 * 4 * 40 * 24 * 4;
  const uint64_t moved = tpusim_backend::dma_hbm_bytes(step->program->cores(0));
  EXPECT_GE(moved, 4 * scores_bytes);
  EXPECT_LT(moved, 4 * scores_bytes + 3 * 4 * 24 * 4 * 2 + 4096);
}

// Updates written into their variables in place, and one kept apart because a later fragment
// reads the old value, give the cpu's values over three steps, bit for bit: each step's outputs
// read the variables the step before updated.
TEST(TpusimBackend, UpdatesInPlaceComputeWhatTheCpuDoes) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 32});
  Initializer ones;
  ones.kind = InitKind::kConstant;
  ones.value = 1.0f;
  const Value w = b.variable("w", DType::kF32, {64, 32}, ones);
  const Value m = b.variable("m", DType::kF32, {64, 32}, ones);
  const Value m_next = m * 0.9f + x;
  b.update(m, m_next);
  const Value w_next = w - m_next * 0.25f;
  b.update(w, w_next);
  b.output("old_m", m * 2.0f);  // made after m_next: m's update is not in place
  b.output("new_w", w_next + 1.0f);
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->plan.in_place[static_cast<size_t>(w_next.id)], w.id);
  EXPECT_EQ(step->plan.in_place[static_cast<size_t>(m_next.id)], -1);
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {64, 32}}};
  std::map<std::string, Outputs> last;
  for (const char* name : {"tpusim", "cpu"}) {
    auto backend = make_backend(name);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto exe = (*backend)->compile(b.graph(), CompileOptions{});
    ASSERT_TRUE(exe.ok()) << exe.status();
    Variables v = initial_variables(b.graph());
    for (uint64_t s = 0; s < 3; ++s) {
      auto out = (*backend)->run(**exe, v, {opcheck::make_feeds(c, 20 + s)}, s);
      ASSERT_TRUE(out.ok()) << out.status();
      last[str_cat(name, s)] = out->at(0);
    }
  }
  for (uint64_t s = 0; s < 3; ++s) {
    for (const auto& [output, value] : last.at(str_cat("cpu", s))) {
      const std::vector<float>& f = last.at(str_cat("tpusim", s)).at(output).f;
      ASSERT_EQ(f.size(), value.f.size()) << output;
      EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << output << " step " << s;
    }
  }
}

// A dropout's uniforms drawn in the tiles of the group that compares them with the rate (XLA's
// fused loop generates an rng's elements where it reads them) give what the cpu and the draws
// written to HBM give, bit for bit (the draws are counter-based: each element's is the same
// wherever it is made); the rng has no fragment of its own, and the step moves two f32 passes
// of the draws fewer.
TEST(TpusimBackend, RngDrawnInItsReadersTilesComputesWhatTheCpuDoes) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 200});
  const Value keep = b.binary(Op::kGreater, b.rng_uniform(x.shape(), 41), b.scalar(0.1f));
  b.output("dropped", x * keep * (1.0f / 0.9f));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {300, 200}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 13)};
  CompileOptions apart;
  apart.fuse_rng = false;
  const Outputs drawn = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs written = run_once(b.graph(), apart, feeds);
  const Outputs cpu = testing::run_once_on("cpu", b.graph(), CompileOptions{}, feeds);
  ASSERT_EQ(drawn.size(), 1u);
  for (const Outputs* other : {&written, &cpu}) {
    const std::vector<float>& f = other->at("dropped").f;
    ASSERT_EQ(f.size(), drawn.at("dropped").f.size());
    EXPECT_EQ(std::memcmp(f.data(), drawn.at("dropped").f.data(), f.size() * 4), 0);
  }
  const auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  const config::SliceSpec& v3 = **slice;
  auto fused = tpusim_backend::compile_graph(b.graph(), v3, 0);
  tpusim_backend::StepOptions apart_step;
  apart_step.fuse_rng = false;
  auto unfused = tpusim_backend::compile_graph(b.graph(), v3, 0, apart_step);
  ASSERT_TRUE(fused.ok() && unfused.ok()) << fused.status() << unfused.status();
  EXPECT_EQ(tpusim_backend::instructions_of(fused->program->cores(0), "rng_uniform"), 0);
  EXPECT_GT(tpusim_backend::instructions_of(unfused->program->cores(0), "rng_uniform"), 0);
  const uint64_t x_bytes = 300 * 200 * 4;
  EXPECT_EQ(tpusim_backend::dma_hbm_bytes(unfused->program->cores(0)) -
                tpusim_backend::dma_hbm_bytes(fused->program->cores(0)),
            2 * x_bytes);
}

}  // namespace
}  // namespace tpusim::runtime
