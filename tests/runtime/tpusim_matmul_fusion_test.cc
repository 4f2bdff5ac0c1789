// Elementwise groups recomputed by the batched matmuls that read them (fusion_plan.h, "groups
// recomputed by their readers"), and groups computed by the batched matmul whose product they
// consume ("consumers taken in by matmuls"; lower_matmul.cc), compute what the groups written and
// read back compute.
#include <cstring>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/program_counts.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace {

using testing::run_once;

// The step compiled on v3-8's core 0 as it is and with `off` (a fusion turned off).
std::pair<absl::StatusOr<tpusim_backend::CompiledStep>,
          absl::StatusOr<tpusim_backend::CompiledStep>>
compile_on_and_off(const Graph& graph, const tpusim_backend::StepOptions& off) {
  const auto slice = config::load_slice("v3-8");
  if (!slice.ok()) return {slice.status(), slice.status()};
  return {tpusim_backend::compile_graph(graph, **slice, 0),
          tpusim_backend::compile_graph(graph, **slice, 0, off)};
}

// The step's `outputs` outputs run once on `c`'s inputs as it is and with `off`: bit for bit the
// same.
void expect_the_same_bits(const Graph& graph, const CompileOptions& off, const opcheck::OpCase& c,
                          size_t outputs, const std::string& what) {
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 17)};
  const Outputs on = run_once(graph, CompileOptions{}, feeds);
  const Outputs written = run_once(graph, off, feeds);
  ASSERT_EQ(on.size(), outputs) << what;
  for (const auto& [name, value] : written) {
    const std::vector<float>& f = on.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name << " " << what;
  }
}

// The step compiled with the matmul consumers taken in and written (compile_on_and_off): one
// taken in, none written, no instruction counted under `root_op` (the group's fragment's name
// when written) once taken in, and in f32 (`f32`) `saved` bytes fewer moved through HBM.
void expect_one_consumer_taken_in(const Graph& graph, const std::string& root_op, bool f32,
                                  uint64_t saved, const std::string& what) {
  tpusim_backend::StepOptions written_options;
  written_options.fuse_matmul_consumers = false;
  auto [taken, written] = compile_on_and_off(graph, written_options);
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(taken->matmul_consumers, 1u) << what;
  EXPECT_EQ(written->matmul_consumers, 0u) << what;
  // The group's fragment is the product's: no instruction is the group root's own.
  EXPECT_EQ(taken->instructions_per_op.count(root_op), 0u) << what;
  EXPECT_GT(written->instructions_per_op.count(root_op), 0u) << what;
  if (f32) {
    EXPECT_EQ(tpusim_backend::dma_hbm_bytes(written->program->cores(0)) -
                  tpusim_backend::dma_hbm_bytes(taken->program->cores(0)),
              saved)
        << what;
  }
}

// Attention's dropout as BERT computes it: the probabilities times the keep mask (the uniforms
// compared with the rate) and 1/0.9, read by the product with the values and, transposed, by the
// values' gradient. Each product makes its operand in VMEM from the probabilities and the
// mask, for the entries of its tile, before its MXUs read it; the dropped probabilities are
// never written. The values are the written group's bit for bit (the same operations on the same
// values, the products' sums in the same order), in f32 and with bf16 operands; in f32 the step
// moves the dropped value's bytes once less (the group read the probabilities and the mask and
// wrote its value, each product read the value; now each product reads the two).
TEST(TpusimBackend, DropoutsMadeByTheProductsReadingThemComputeWhatTheWrittenOnesDo) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    GraphBuilder b;
    const Shape probs_shape{2, 3, 64, 64};
    const Value p = b.infeed("p", DType::kF32, {2, 3, 64, 64});
    const Value u = b.infeed("u", DType::kF32, {2, 3, 64, 64});
    const Value v = b.infeed("v", DType::kF32, {2, 3, 64, 16});
    const Value g = b.infeed("g", DType::kF32, {2, 3, 64, 16});
    auto typed = [&](Value t) { return dtype == DType::kBF16 ? b.cast(t, DType::kBF16) : t; };
    // The probabilities and the mask are stored (the backward pass reads them: the softmax's
    // gradient, the dropout's).
    const Value probs = typed(p);
    const Value keep = b.cast(b.binary(Op::kGreater, u, b.scalar(0.1f)), dtype);
    b.output("keep", keep);
    if (dtype == DType::kBF16) b.output("probs", probs);
    const Value dropped = probs * keep * (1.0f / 0.9f);
    b.output("context", b.matmul(dropped, typed(v)));
    b.output("values_grad", b.matmul(b.transpose(dropped, {0, 1, 3, 2}), typed(g)));
    ASSERT_TRUE(b.status().ok()) << b.status();

    tpusim_backend::StepOptions written_options;
    written_options.fuse_matmul_producers = false;
    auto [made, written] = compile_on_and_off(b.graph(), written_options);
    ASSERT_TRUE(made.ok()) << made.status();
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(made->matmul_producers, 2u) << dtype_name(dtype);
    EXPECT_EQ(written->matmul_producers, 0u);
    // The dropped probabilities' fragment is gone: only the products are emitted for them.
    EXPECT_EQ(made->instructions_per_op.count("mul"), 0u) << dtype_name(dtype);
    if (dtype == DType::kF32) {
      EXPECT_EQ(tpusim_backend::dma_hbm_bytes(written->program->cores(0)) -
                    tpusim_backend::dma_hbm_bytes(made->program->cores(0)),
                static_cast<uint64_t>(probs_shape.elements()) * 4);
    }

    opcheck::OpCase c;
    c.inputs = {{"p", DType::kF32, {2, 3, 64, 64}},
                {"u", DType::kF32, {2, 3, 64, 64}},
                {"v", DType::kF32, {2, 3, 64, 16}},
                {"g", DType::kF32, {2, 3, 64, 16}}};
    CompileOptions write;
    write.fuse_matmul_producers = false;
    expect_the_same_bits(b.graph(), write, c, dtype == DType::kBF16 ? 4u : 3u, dtype_name(dtype));
  }
}

// A dropout's gradient, the incoming gradient of the dropped probabilities (the product of the
// context's gradient with the values, read transposed) times the keep mask and 1/0.9, is computed
// by that product's fragment from its products in VMEM, and the product is never written: the
// values are the written product's and group's bit for bit (the product rounded to bf16 before
// the group reads it, as its own fragment stores it), in f32 and with bf16 operands; in f32 the
// step moves the product's bytes twice less (its write and the group's read).
TEST(TpusimBackend, DropoutGradientsComputedByTheirProductsComputeWhatTheWrittenOnesDo) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    GraphBuilder b;
    const Value u = b.infeed("u", DType::kF32, {2, 3, 64, 64});
    const Value v = b.infeed("v", DType::kF32, {2, 3, 64, 16});
    const Value g = b.infeed("g", DType::kF32, {2, 3, 64, 16});
    auto typed = [&](Value t) { return dtype == DType::kBF16 ? b.cast(t, DType::kBF16) : t; };
    const Value keep = b.cast(b.binary(Op::kGreater, u, b.scalar(0.1f)), dtype);
    b.output("keep", keep);
    const Value dropped_grad = b.matmul(typed(g), b.transpose(typed(v), {0, 1, 3, 2}));
    b.output("probs_grad", dropped_grad * keep * (1.0f / 0.9f));
    ASSERT_TRUE(b.status().ok()) << b.status();

    expect_one_consumer_taken_in(b.graph(), "mul", dtype == DType::kF32,
                                 uint64_t{2} * 2 * 3 * 64 * 64 * 4, dtype_name(dtype));

    opcheck::OpCase c;
    c.inputs = {{"u", DType::kF32, {2, 3, 64, 64}},
                {"v", DType::kF32, {2, 3, 64, 16}},
                {"g", DType::kF32, {2, 3, 64, 16}}};
    CompileOptions write;
    write.fuse_matmul_consumers = false;
    expect_the_same_bits(b.graph(), write, c, 2, dtype_name(dtype));
  }
}

// Attention's scores as BERT computes them: the queries times the keys (read transposed), scaled
// by 1/sqrt(d) and added the mask's adder, [batch, 1, 1, keys], one row of it for every head and
// query of a batch entry. The product's fragment computes the group from its products in VMEM,
// the whole adder loaded once and each run of entries of one batch entry reading its row (at 256
// keys a tile holds 4 entries, and the second and third start in the middle of a sequence's 3
// heads), and the scores are written once, the products never: the values are the written
// product's and group's bit for bit, in f32 and with bf16 operands; in f32 the step moves the
// product's bytes twice less (the adder's bytes are read once either way). A bias of the keys'
// axis and a scalar (a maximum with it) read the same way are as exact.
TEST(TpusimBackend, MaskedScoresComputedByTheirProductsComputeWhatTheWrittenOnesDo) {
  constexpr int64_t kBatch = 4, kHeads = 3, kSeq = 256, kDepth = 16;
  for (const bool mask : {true, false}) {
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const std::string what = str_cat(dtype_name(dtype), mask ? " mask" : " bias and scalar");
      GraphBuilder b;
      const Value q = b.infeed("q", DType::kF32, {kBatch, kHeads, kSeq, kDepth});
      const Value k = b.infeed("k", DType::kF32, {kBatch, kHeads, kSeq, kDepth});
      const Value m = b.infeed("m", DType::kF32, {kBatch, kSeq});
      const Value s = b.infeed("s", DType::kF32, {});
      auto typed = [&](Value t) { return dtype == DType::kBF16 ? b.cast(t, DType::kBF16) : t; };
      Value adder = typed((1.0f - m) * -10000.0f);
      adder = mask ? b.reshape(adder, {kBatch, 1, 1, kSeq})
                   : b.reshape(b.slice(adder, {0, 0}, {1, kSeq}), {kSeq});
      b.output("adder", adder);
      const Value scores = b.matmul(typed(q), b.transpose(typed(k), {0, 1, 3, 2}));
      Value masked = scores * 0.25f + adder;
      if (!mask) masked = b.binary(Op::kMax, masked, typed(s));
      b.output("scores", masked);
      ASSERT_TRUE(b.status().ok()) << b.status();

      expect_one_consumer_taken_in(b.graph(), mask ? "add" : "max", dtype == DType::kF32,
                                   uint64_t{2} * kBatch * kHeads * kSeq * kSeq * 4, what);

      opcheck::OpCase c;
      c.inputs = {{"q", DType::kF32, {kBatch, kHeads, kSeq, kDepth}},
                  {"k", DType::kF32, {kBatch, kHeads, kSeq, kDepth}},
                  {"m", DType::kF32, {kBatch, kSeq}},
                  {"s", DType::kF32, {}}};
      CompileOptions write;
      write.fuse_matmul_consumers = false;
      expect_the_same_bits(b.graph(), write, c, 2, what);
    }
  }
}

}  // namespace
}  // namespace tpusim::runtime
