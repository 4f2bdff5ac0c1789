// The tpusim backend: every op case against the cpu reference, the bf16 agreement with cpu:mxu,
// and multi-step runs with variable updates. One System per process (one test per process).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/graph/optimizers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_backend_test {

using opcheck::parse_backend_spec;
using testing::run_once;

TEST(TpusimBackend, EveryOpCaseMatchesTheCpuReference) {
  int ops = 0;
  for (const auto& c : opcheck::all_cases()) {
    auto results = opcheck::run_case(c, *parse_backend_spec("tpusim"));
    ASSERT_TRUE(results.ok()) << c.op << " " << c.shape << ": " << results.status();
    for (const auto& r : *results) {
      EXPECT_TRUE(r.passed) << r.op << " " << r.shape << " " << r.tensor << ": rel "
                            << r.max_rel_error << " > " << r.tolerance << "; worst " << r.worst;
    }
    ++ops;
  }
  EXPECT_GE(ops, 38);
}

// Same bf16 inputs: tpusim and cpu:mxu differ only in the order of f32 accumulation, orders of
// magnitude less than either differs from fp32.
TEST(TpusimBackend, AgreesWithCpuMxuFarMoreTightlyThanWithFp32) {
  for (const auto& c : opcheck::all_cases()) {
    if (!c.uses_matmul || c.bf16) continue;  // a bf16 case's matmuls take bf16 values everywhere
    auto vs_fp32 = opcheck::run_case(c, *parse_backend_spec("tpusim"));
    auto vs_mxu =
        opcheck::run_case(c, *parse_backend_spec("tpusim"), 1, *parse_backend_spec("cpu:mxu"));
    ASSERT_TRUE(vs_fp32.ok() && vs_mxu.ok());
    for (size_t i = 0; i < vs_fp32->size(); ++i) {
      const auto& a = (*vs_fp32)[i];
      const auto& b = (*vs_mxu)[i];
      if (a.tensor.find("bias") != std::string::npos) continue;  // no matmul on the bias path
      EXPECT_GT(a.max_rel_error, 5e-4) << c.op << " " << a.tensor;
      EXPECT_LT(b.max_rel_error, 2e-6) << c.op << " " << b.tensor;
      EXPECT_TRUE(b.passed) << c.op << " " << b.tensor;
    }
  }
}

// Three steps of SGD on a small model: the device loop reads a batch per step, updates the
// weights in HBM, and the host reads them back; cpu (mxu precision) does the same.
TEST(TpusimBackend, MultiStepTrainingMatchesCpu) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {16, 12});
  const Value labels = b.infeed("labels", DType::kS32, {16});
  const Value logits = layers::dense(b, layers::dense(b, x, 20, layers::Activation::kRelu, 1), 4,
                                     layers::Activation::kNone, 2);
  const Value loss = layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = gradients(b, loss, vars);
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < vars.size(); ++i) b.update(vars[i], vars[i] - (*grads)[i] * 0.5f);
  b.output("loss", loss);
  ASSERT_TRUE(b.status().ok()) << b.status();

  std::vector<Feeds> feeds;
  for (uint32_t s = 0; s < 3; ++s) {
    opcheck::OpCase c;
    c.inputs = {{"x", DType::kF32, {16, 12}}, {"labels", DType::kS32, {16}, 0, 4}};
    feeds.push_back(opcheck::make_feeds(c, 10));  // the same batch: the loss must fall
  }
  auto run_on = [&](const char* name, Precision precision, Variables* v) {
    auto backend = make_backend(name);
    auto exe = (*backend)->compile(b.graph(), {precision});
    EXPECT_TRUE(exe.ok()) << exe.status();
    auto out = (*backend)->run(**exe, *v, feeds, 100);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  };
  Variables on_cpu = initial_variables(b.graph());
  Variables on_tpu = on_cpu;
  const auto cpu = run_on("cpu", Precision::kMxu, &on_cpu);
  const auto tpu = run_on("tpusim", Precision::kFp32, &on_tpu);
  ASSERT_EQ(tpu.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_NEAR(tpu[s].at("loss").f[0], cpu[s].at("loss").f[0], 1e-4) << "step " << s;
  }
  EXPECT_LT(tpu[2].at("loss").f[0], tpu[0].at("loss").f[0]);  // it learns
  for (const auto& [name, value] : on_cpu) {
    for (size_t i = 0; i < value.f.size(); ++i)
      EXPECT_NEAR(on_tpu[name].f[i], value.f[i], 1e-4) << name;
  }
}

// Strided windows built from the images' stride phases (the width a multiple of the stride, the
// output rows a phase wide) are the cpu's bit for bit: ResNet-50's stem geometry (7x7, stride 2,
// 3 rows and columns of explicit padding) on images of an odd height, whose row phases are cut
// image by image, and a 3x3 SAME window at stride 2 (no padding above, one row below); and the
// adjoint of each.
TEST(TpusimBackend, StridedPatchesFromStridePhasesAreTheCpus) {
  GraphBuilder b;
  const Value stem = b.infeed("stem", DType::kF32, {3, 31, 30, 3});
  const Value pool = b.infeed("pool", DType::kF32, {2, 16, 16, 5});
  Window w7;
  w7.kh = w7.kw = 7;
  w7.sh = w7.sw = 2;
  w7.explicit_padding = true;
  w7.pad_top = w7.pad_left = w7.pad_bottom = w7.pad_right = 3;
  Window w3;
  w3.kh = w3.kw = 3;
  w3.sh = w3.sw = 2;
  w3.same = true;
  const Value p7 = b.extract_patches(stem, w7);
  const Value p3 = b.extract_patches(pool, w3);
  ASSERT_TRUE(b.status().ok()) << b.status();
  ASSERT_EQ(p7.shape(), Shape({3, 16, 15, 147}));
  ASSERT_EQ(p3.shape(), Shape({2, 8, 8, 45}));
  b.output("stem_patches", p7);
  b.output("pool_patches", p3);
  const Window stem_window = b.node(p7).attrs.window, pool_window = b.node(p3).attrs.window;
  b.output("stem_back", b.patches_to_image(p7 * 1.5f, stem_window));
  b.output("pool_back", b.patches_to_image(p3 * 1.5f, pool_window));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"stem", DType::kF32, {3, 31, 30, 3}}, {"pool", DType::kF32, {2, 16, 16, 5}}};
  testing::expect_the_cpus_bits(b.graph(), {opcheck::make_feeds(c, 11)}, 4);
}

// Each input's own values, read back from the cpu backend's run of the same feeds: transposes
// move data and round nothing, so tpusim's must be bit for bit the cpu's. The shapes take every
// path: a block's rows along the batch, along a and along c of [batch, a, c, inner]; one vector
// transpose per entry (inner 1) including a lone matrix; entries spread over several VMEM tiles;
// a matrix too big for one tile (the tiled fallback); and a permutation done as two rotations.
TEST(TpusimBackend, TransposesInVmemMoveEveryElementWhereTheCpuDoes) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const std::vector<Case> cases = {
      {{128, 5, 3, 8}, {0, 2, 1, 3}},    // rows along the batch (128 entries in a tile)
      {{6, 28, 4, 16}, {0, 2, 1, 3}},    // rows along a
      {{2, 3, 40, 8}, {0, 2, 1, 3}},     // rows along c
      {{64, 28, 16}, {0, 2, 1}},         // a vector transpose per entry
      {{30, 50}, {1, 0}},                // one entry
      {{20, 50, 8, 256}, {0, 2, 1, 3}},  // 400 KiB entries: 7 to a tile, 3 tiles
      {{1024, 1024}, {1, 0}},            // 4 MiB: no tile holds it
      {{2, 3, 4, 5}, {3, 1, 0, 2}},      // not a rotation: two of them through a temporary
  };
  GraphBuilder b;
  opcheck::OpCase c;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    const Shape shape(cases[i].shape);
    const Value x = b.infeed(name, DType::kF32, shape);
    b.output("t" + std::to_string(i), b.transpose(x, cases[i].perm));
    c.inputs.push_back({name, DType::kF32, shape});
  }
  ASSERT_TRUE(b.status().ok()) << b.status();
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 11)};
  testing::expect_the_cpus_bits(b.graph(), feeds, cases.size());
}

// Folded broadcasts (a row or column operand read in place) give what the cpu backend computes
// from the materialised broadcast, bit for bit: rows of a per-channel vector over an image batch
// (its 65,536 rows over many VMEM tiles) and a column of per-row values, in fused groups and alone.
TEST(TpusimBackend, FoldedBroadcastsComputeWhatTheCpuDoes) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {256, 16, 16, 16});
  const Value mean = b.infeed("mean", DType::kF32, {16});
  const Value scale = b.infeed("scale", DType::kF32, {16});
  const Value rows = b.infeed("rows", DType::kF32, {300, 10});
  const Value sums = b.infeed("sums", DType::kF32, {300});
  const Value centred = x - b.broadcast(mean, x.shape(), {3});
  b.output("normalised", centred * b.broadcast(scale, x.shape(), {3}) + 0.5f);
  b.output("divided", rows / b.broadcast(sums, rows.shape(), {0}));
  b.output("shifted", b.broadcast(sums, rows.shape(), {0}) - rows);
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {256, 16, 16, 16}},
              {"mean", DType::kF32, {16}},
              {"scale", DType::kF32, {16}},
              {"rows", DType::kF32, {300, 10}},
              {"sums", DType::kF32, {300}, 1, 2}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 7)};
  testing::expect_the_cpus_bits(b.graph(), feeds, 3);
}

// Reductions over the leading axes of an input many VMEM tiles long (one pipelined pass into an
// accumulator) compute what the cpu does: the maxima bit for bit, the sums to f32 rounding.
TEST(TpusimBackend, LongLeadingAxisReductionsMatchTheCpu) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {16384, 48});
  b.output("sums", b.reduce(Op::kReduceSum, x, {0}));
  b.output("maxima", b.reduce(Op::kReduceMax, x, {0}));
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {16384, 48}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 7)};
  const Outputs tpu = run_once(b.graph(), CompileOptions{}, feeds);
  auto cpu_backend = make_backend("cpu");
  ASSERT_TRUE(cpu_backend.ok());
  auto exe = (*cpu_backend)->compile(b.graph(), CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Variables none;
  auto cpu = (*cpu_backend)->run(**exe, none, feeds, 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<float>& maxima = tpu.at("maxima").f;
  ASSERT_EQ(maxima.size(), 48u);
  EXPECT_EQ(std::memcmp(maxima.data(), cpu->at(0).at("maxima").f.data(), 48 * 4), 0);
  const std::vector<float>& xs = feeds[0].at("x").f;
  for (size_t j = 0; j < 48; ++j) {
    double magnitude = 0;  // the sum of |x| bounds f32 rounding's error
    for (size_t r = 0; r < 16384; ++r) magnitude += std::abs(xs[r * 48 + j]);
    EXPECT_NEAR(tpu.at("sums").f[j], cpu->at(0).at("sums").f[j], 1e-6 * magnitude) << j;
  }
}

// Batched GEMMs with no operand shared (attention's) run as one fragment over tiles of whole
// entries; each entry's product is bit for bit the one a lone 2D matmul of that entry gives (the
// same MXU sums, depth chunks in the same order: 16 deep, and 130 deep in two chunks).
TEST(TpusimBackend, BatchedMatmulsInVmemMatchEachEntrysOwnMatmul) {
  struct Case {
    int64_t batch, m, k, n;
  };
  const std::vector<Case> cases = {{64, 28, 16, 28}, {3, 16, 130, 9}};
  GraphBuilder b;
  opcheck::OpCase c;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto [batch, m, k, n] = cases[i];
    const std::string id = std::to_string(i);
    const Value a = b.infeed("a" + id, DType::kF32, {batch, m, k});
    const Value w = b.infeed("w" + id, DType::kF32, {batch, k, n});
    b.output("batched" + id, b.matmul(a, w));
    for (int64_t e : {int64_t{0}, batch - 1}) {
      const Value ae = b.reshape(b.slice(a, {e, 0, 0}, {e + 1, m, k}), {m, k});
      const Value we = b.reshape(b.slice(w, {e, 0, 0}, {e + 1, k, n}), {k, n});
      b.output("entry" + id + "_" + std::to_string(e), b.matmul(ae, we));
    }
    c.inputs.push_back({"a" + id, DType::kF32, {batch, m, k}});
    c.inputs.push_back({"w" + id, DType::kF32, {batch, k, n}});
  }
  ASSERT_TRUE(b.status().ok()) << b.status();
  for (Precision precision : {Precision::kFp32, Precision::kMxu}) {
    CompileOptions options;
    options.precision = precision;
    const Outputs out = run_once(b.graph(), options, {opcheck::make_feeds(c, 3)});
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto [batch, m, k, n] = cases[i];
      const std::string id = std::to_string(i);
      const std::vector<float>& batched = out.at("batched" + id).f;
      ASSERT_EQ(batched.size(), static_cast<size_t>(batch * m * n));
      for (int64_t e : {int64_t{0}, batch - 1}) {
        const std::vector<float>& entry = out.at("entry" + id + "_" + std::to_string(e)).f;
        ASSERT_EQ(entry.size(), static_cast<size_t>(m * n));
        EXPECT_EQ(std::memcmp(entry.data(), batched.data() + e * m * n, entry.size() * 4), 0)
            << kPrecisions.name(precision) << " case " << i << " entry " << e;
      }
    }
  }
}

}  // namespace tpusim_backend_test
}  // namespace tpusim::runtime

namespace tpusim::runtime {
namespace tpusim_backend_test {

// BERT's lookups on tpusim are the cpu's bit for bit: gather copies rows (indices out of range
// clamped on both), and scatter_add, the table's gradient, sums 700 update rows into 300 (every
// row named twice on average, some far more) in index order in f32; erf is the host's erff.
TEST(TpusimBackend, LookupsAndErfAreTheCpusBitForBit) {
  GraphBuilder b;
  const Value table = b.infeed("table", DType::kF32, {300, 130});
  const Value ids = b.infeed("ids", DType::kS32, {7, 100});
  const Value updates = b.infeed("updates", DType::kF32, {7, 100, 130});
  b.output("rows", b.gather(table, ids));
  b.output("sums", b.scatter_add(updates, ids, 300));
  b.output("erf", b.unary(Op::kErf, table * 3.0f));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"table", DType::kF32, {300, 130}},
              {"ids", DType::kS32, {7, 100}, -20, 320},
              {"updates", DType::kF32, {7, 100, 130}, -1e3f, 1e3f}};
  const Feeds feeds = opcheck::make_feeds(c, 4);
  const Outputs tpu = run_once(b.graph(), {}, {feeds});
  const Outputs cpu = testing::run_once_on("cpu", b.graph(), {}, {feeds});
  for (const char* name : {"rows", "sums", "erf"}) {
    const std::vector<float>& got = tpu.at(name).f;
    const std::vector<float>& ref = cpu.at(name).f;
    ASSERT_EQ(got.size(), ref.size()) << name;
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), 4 * got.size()), 0) << name;
  }
  // The sums are not the trivial ones: some row took many updates.
  int most = 0;
  std::vector<int> named(300, 0);
  for (int32_t i : feeds.at("ids").i) most = std::max(most, ++named[std::clamp(i, 0, 299)]);
  EXPECT_GE(most, 20);  // the clamped ends
}

// rsqrt and tanh on tpusim are the cpu's bit for bit: IEEE 1/sqrt and the host's tanhf, the same
// on every x86-64 CPU. Eigen's fast math took rsqrt from the CPU's RSQRTPS estimate (one Newton
// step after it), whose bits each CPU maker chooses: on an Intel Xeon 43% of the values in
// [0.2, 3.2) came out other than IEEE's, and a loss the docs recorded on another CPU moved
// (docs/reliability.md, "Figures that hold on any host").
TEST(TpusimBackend, RsqrtAndTanhAreTheCpusBitForBitOnAnyHost) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 130});
  b.output("rsqrt", b.unary(Op::kRsqrt, b.unary(Op::kSquare, x) * 100.0f));
  b.output("tanh", b.unary(Op::kTanh, x * 3.0f));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {300, 130}}};
  const Feeds feeds = opcheck::make_feeds(c, 5);
  const Outputs tpu = run_once(b.graph(), {}, {feeds});
  const Outputs cpu = testing::run_once_on("cpu", b.graph(), {}, {feeds});
  for (const char* name : {"rsqrt", "tanh"}) {
    const std::vector<float>& got = tpu.at(name).f;
    const std::vector<float>& ref = cpu.at(name).f;
    ASSERT_EQ(got.size(), ref.size()) << name;
    int differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &ref[i], 4) != 0;
    EXPECT_EQ(differ, 0) << name << ": values other than the cpu's of " << got.size();
  }
}

}  // namespace tpusim_backend_test
}  // namespace tpusim::runtime
