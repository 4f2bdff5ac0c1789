// Matmuls that read their operands through transposes where the transposes' inputs lie
// (matmul_operand_view: XLA's TransposeFolding and layout assignment) compute what the cpu
// backend computes, on every path lower_matmul takes: a GEMM over HBM, a batch of products whose
// entries fit a VMEM tile, and a batch whose entries do not (one GEMM each). A transpose of the
// last two axes has the MXUs' slices transposed in VMEM; a split of heads ([batch, seq, heads,
// depth] -> [batch, heads, seq, depth], attention's) has each entry's rows read apart.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace {

using testing::run_once;
using testing::run_once_on;

// Runs `graph` on tpusim and on the cpu backend, both with the MXU's bf16 inputs and f32 sums,
// fed `inputs` drawn from `seed`, and expects its `outputs` outputs to agree within 1e-5 of each
// one's largest magnitude.
void expect_cpus_values(const Graph& graph, std::vector<opcheck::InputSpec> inputs, uint32_t seed,
                        size_t outputs) {
  opcheck::OpCase c;
  c.inputs = std::move(inputs);
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, seed)};
  CompileOptions mxu;
  mxu.precision = Precision::kMxu;
  const Outputs tpusim = run_once(graph, mxu, feeds);
  const Outputs cpu = run_once_on("cpu", graph, mxu, feeds);
  ASSERT_EQ(tpusim.size(), outputs);
  for (const auto& [name, value] : cpu) {
    const std::vector<float>& t = tpusim.at(name).f;
    ASSERT_EQ(t.size(), value.f.size()) << name;
    float largest = 0;
    for (float x : value.f) largest = std::max(largest, std::fabs(x));
    size_t bad = 0;
    for (size_t i = 0; i < t.size(); ++i) bad += std::fabs(t[i] - value.f[i]) > 1e-5f * largest;
    EXPECT_EQ(bad, 0u) << name;
  }
}

TEST(TpusimBackend, FoldedTransposesComputeWhatTheCpuDoes) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {300, 200});
  const Value w = b.infeed("w", DType::kF32, {300, 72});
  const Value x = b.infeed("x", DType::kF32, {5, 33, 40});
  const Value y = b.infeed("y", DType::kF32, {5, 17, 40});
  const Value z = b.infeed("z", DType::kF32, {5, 9, 17});
  const Value big = b.infeed("big", DType::kF32, {2, 1536, 1024});
  const Value g = b.infeed("g", DType::kF32, {2, 1536, 96});
  const Value h = b.infeed("h", DType::kF32, {3, 20, 4, 24});
  const Value hk = b.infeed("hk", DType::kF32, {3, 20, 4, 24});
  const Value p = b.infeed("p", DType::kF32, {3, 4, 20, 20});
  const Value hbig = b.infeed("hbig", DType::kF32, {2, 1536, 2, 1024});
  const Value gg = b.infeed("gg", DType::kF32, {2, 2, 1536, 96});
  b.output("at_w", b.matmul(b.transpose(a, {1, 0}), w));  // lhs, 2D: [200, 72]
  b.output("a_wt", b.matmul(b.transpose(w, {1, 0}), a));  // lhs, 2D: [72, 200]
  // A transpose of a transpose: the product reads w as it lies, through both.
  b.output("at_wtt", b.matmul(b.transpose(a, {1, 0}), b.transpose(b.transpose(w, {1, 0}), {1, 0})));
  b.output("a_xt", b.matmul(a, b.transpose(b.infeed("v", DType::kF32, {64, 200}), {1, 0})));
  b.output("x_yt", b.matmul(x, b.transpose(y, {0, 2, 1})));  // batched rhs: [5, 33, 17]
  b.output("xt_x", b.matmul(b.transpose(x, {0, 2, 1}), x));  // batched lhs: [5, 40, 40]
  b.output("yt_zt", b.matmul(b.transpose(y, {0, 2, 1}), b.transpose(z, {0, 2, 1})));  // both
  b.output("bigt_g", b.matmul(b.transpose(big, {0, 2, 1}), g));  // entries over a tile
  // Heads split: q k^T as attention's scores (the rhs through two transposes), p v, q^T p.
  const Value q = b.transpose(h, {0, 2, 1, 3});
  const Value k = b.transpose(hk, {0, 2, 1, 3});
  b.output("q_kt", b.matmul(q, b.transpose(k, {0, 1, 3, 2})));  // [3, 4, 20, 20]
  b.output("p_v", b.matmul(p, k));                              // [3, 4, 20, 24]
  b.output("qt_p", b.matmul(b.transpose(q, {0, 1, 3, 2}), p));  // [3, 4, 24, 20]
  // Entries over a tile, each a GEMM over HBM reading its rows apart: [2, 2, 1024, 96].
  b.output("hbigt_gg", b.matmul(b.transpose(hbig, {0, 2, 3, 1}), gg));
  ASSERT_TRUE(b.status().ok()) << b.status();

  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  // No transpose is computed: every one is read through.
  EXPECT_EQ(step->instructions_per_op.count("transpose"), 0u);

  expect_cpus_values(b.graph(),
                     {{"a", DType::kF32, {300, 200}},
                      {"w", DType::kF32, {300, 72}},
                      {"x", DType::kF32, {5, 33, 40}},
                      {"y", DType::kF32, {5, 17, 40}},
                      {"z", DType::kF32, {5, 9, 17}},
                      {"big", DType::kF32, {2, 1536, 1024}},
                      {"g", DType::kF32, {2, 1536, 96}},
                      {"v", DType::kF32, {64, 200}},
                      {"h", DType::kF32, {3, 20, 4, 24}},
                      {"hk", DType::kF32, {3, 20, 4, 24}},
                      {"p", DType::kF32, {3, 4, 20, 20}},
                      {"hbig", DType::kF32, {2, 1536, 2, 1024}},
                      {"gg", DType::kF32, {2, 2, 1536, 96}}},
                     11, 12);
}

// Batched products whose only reader merges their heads ([batch, heads, seq, depth] -> [batch,
// seq, heads, depth], attention's context and its gradients) store each entry where the merge
// puts it, on both of lower_matmul's batched paths (entries in a VMEM tile, and a GEMM over HBM
// per entry that does not fit one); the merges are never computed. One merged through a
// transpose of its entries (the keys' gradient, q^T g transposed, its q a split of heads) is
// computed as g^T q; so is a product, 2D or batched, whose only reader transposes its last two
// axes (a weight gradient x^T g transposed back). A product read by something else besides its
// merge is written as it lies and merged by a transpose of its own.
TEST(TpusimBackend, ProductsStoredThroughTheirMergesAndTransposesComputeWhatTheCpuDoes) {
  GraphBuilder b;
  const Value p = b.infeed("p", DType::kF32, {3, 4, 20, 20});
  const Value v = b.infeed("v", DType::kF32, {3, 4, 20, 24});
  const Value big = b.infeed("big", DType::kF32, {2, 2, 1536, 1024});
  const Value g = b.infeed("g", DType::kF32, {2, 2, 1024, 96});
  const Value context = b.matmul(p, v);  // [3, 4, 20, 24]
  b.output("merged", b.reshape(b.transpose(context, {0, 2, 1, 3}), {3 * 20, 4 * 24}));
  b.output("big_g", b.transpose(b.matmul(big, g), {0, 2, 1, 3}));  // [2, 1536, 2, 96]
  const Value q = b.transpose(b.infeed("h", DType::kF32, {3, 20, 4, 24}), {0, 2, 1, 3});
  const Value qt_p = b.matmul(b.transpose(q, {0, 1, 3, 2}), p);  // [3, 4, 24, 20]
  b.output("qt_p_merged", b.transpose(b.transpose(qt_p, {0, 1, 3, 2}), {0, 2, 1, 3}));
  const Value x = b.infeed("x", DType::kF32, {64, 40});
  b.output(
      "xt_g_t",
      b.transpose(b.matmul(b.transpose(x, {1, 0}), b.infeed("y", DType::kF32, {64, 30})), {1, 0}));
  b.output("p_u_t",
           b.transpose(b.matmul(p, b.infeed("u", DType::kF32, {3, 4, 20, 8})), {0, 1, 3, 2}));
  const Value kept = b.matmul(p, b.infeed("w", DType::kF32, {3, 4, 20, 8}));
  b.output("kept_merged", b.transpose(kept, {0, 2, 1, 3}));
  b.output("kept", b.unary(Op::kExp, kept));
  ASSERT_TRUE(b.status().ok()) << b.status();

  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->merged_products, 5u);
  EXPECT_EQ(step->instructions_per_op.count("transpose"), 1u);  // kept's merge alone

  expect_cpus_values(b.graph(),
                     {{"p", DType::kF32, {3, 4, 20, 20}},
                      {"v", DType::kF32, {3, 4, 20, 24}},
                      {"big", DType::kF32, {2, 2, 1536, 1024}},
                      {"g", DType::kF32, {2, 2, 1024, 96}},
                      {"w", DType::kF32, {3, 4, 20, 8}},
                      {"h", DType::kF32, {3, 20, 4, 24}},
                      {"x", DType::kF32, {64, 40}},
                      {"y", DType::kF32, {64, 30}},
                      {"u", DType::kF32, {3, 4, 20, 8}}},
                     12, 7);
}

}  // namespace
}  // namespace tpusim::runtime
