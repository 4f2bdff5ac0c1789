// cpu kernels against independent references (naive loops), and the backend's step semantics.
#include <cmath>
#include <cstring>
#include <tuple>

#include <Eigen/Core>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include "runtime/backend/cpu/plan.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "sim/numerics/random.h"
#include "tests/sim/convert_cases.h"

namespace tpusim::runtime {
namespace cpu_backend_test {

HostTensor random_tensor(const Shape& s, uint64_t seed) {
  sim::RandomStream rng(seed);
  HostTensor t = HostTensor::zeros(DType::kF32, s);
  for (float& v : t.f) v = static_cast<float>(2 * rng.uniform() - 1);
  return t;
}

Outputs run_once(GraphBuilder& b, const Feeds& feeds, Variables* vars,
                 Precision precision = Precision::kFp32, uint64_t step = 0) {
  EXPECT_TRUE(b.status().ok()) << b.status();
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {precision});
  EXPECT_TRUE(exe.ok()) << exe.status();
  auto out = (*backend)->run(**exe, *vars, {feeds}, step);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Outputs{};
}

// cast to s32 truncates, saturates and takes NaN to 0, as XLA does (x86's plain conversion would
// give INT32_MIN for NaN and every out-of-range value).
// reduce_sum accumulates in double by default and in f32 with f32_reductions, in the same order:
// 2^24 + 1 + 1 + ... is exact in double and loses every 1 in f32. reduce_max is unaffected.
TEST(CpuBackend, F32ReductionsSumInF32) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {1, 5});
  b.output("sum", b.reduce(Op::kReduceSum, x, {1}));
  b.output("max", b.reduce(Op::kReduceMax, x, {1}));
  Feeds feeds{{"x", HostTensor::from({1, 5}, {16777216.f, 1, 1, 1, 1})}};
  auto backend = make_backend("cpu");
  ASSERT_TRUE(backend.ok());
  for (const bool f32 : {false, true}) {
    CompileOptions options;
    options.f32_reductions = f32;
    auto exe = (*backend)->compile(b.graph(), options);
    ASSERT_TRUE(exe.ok()) << exe.status();
    Variables vars;
    auto out = (*backend)->run(**exe, vars, {feeds}, 0);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).at("sum").f[0], f32 ? 16777216.f : 16777220.f) << f32;
    EXPECT_EQ(out->at(0).at("max").f[0], 16777216.f);
  }
}

TEST(CpuBackend, CastToS32IsXlasConversion) {
  const auto& cases = sim::testing::kF32ToS32Cases;
  const int64_t count = static_cast<int64_t>(std::size(cases));
  GraphBuilder b;
  b.output("y", b.cast(b.infeed("x", DType::kF32, {count}), DType::kS32));
  HostTensor x = HostTensor::zeros(DType::kF32, {count});
  for (int64_t i = 0; i < count; ++i) x.f[static_cast<size_t>(i)] = cases[i].in;
  Variables vars;
  const HostTensor y = run_once(b, {{"x", x}}, &vars).at("y");
  ASSERT_EQ(y.dtype, DType::kS32);
  for (int64_t i = 0; i < count; ++i)
    EXPECT_EQ(y.i[static_cast<size_t>(i)], cases[i].out) << cases[i].in;
}

// conv2d (patches x kernel) against a direct 7-loop convolution, SAME padding, stride 2.
TEST(CpuBackend, Conv2dMatchesDirectConvolution) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 7, 6, 3});
  b.output("y", layers::conv2d(b, x, 4, 3, 2, layers::Padding::kSame));
  const HostTensor xt = random_tensor({2, 7, 6, 3}, 1);
  Variables vars = initial_variables(b.graph());
  vars["conv2d_1/bias"] = random_tensor({4}, 9);
  const HostTensor& w = vars["conv2d_1/kernel"];
  const HostTensor y = run_once(b, {{"x", xt}}, &vars).at("y");
  ASSERT_EQ(y.shape, (Shape{2, 4, 3, 4}));
  // SAME: out = ceil(7/2) x ceil(6/2) = 4 x 3; padding total rows (4-1)*2+3-7 = 2 -> top 1;
  // cols (3-1)*2+3-6 = 1 -> left 0.
  for (int n = 0; n < 2; ++n)
    for (int oy = 0; oy < 4; ++oy)
      for (int ox = 0; ox < 3; ++ox)
        for (int f = 0; f < 4; ++f) {
          double acc = vars["conv2d_1/bias"].f[static_cast<size_t>(f)];
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx)
              for (int c = 0; c < 3; ++c) {
                const int iy = oy * 2 + ky - 1, ix = ox * 2 + kx;
                if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
                acc += xt.f[static_cast<size_t>(((n * 7 + iy) * 6 + ix) * 3 + c)] *
                       w.f[static_cast<size_t>(((ky * 3 + kx) * 3 + c) * 4 + f)];
              }
          EXPECT_NEAR(y.f[static_cast<size_t>(((n * 4 + oy) * 3 + ox) * 4 + f)], acc, 1e-5);
        }
}

TEST(CpuBackend, PoolingMatchesTensorFlowSemantics) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {1, 3, 3, 1});
  b.output("max", layers::max_pooling2d(b, x, 2, 2, layers::Padding::kSame));
  b.output("avg", layers::average_pooling2d(b, x, 2, 2, layers::Padding::kSame));
  Variables vars;
  // All negative: SAME max pooling must not see the zero padding.
  const Outputs out = run_once(
      b, {{"x", HostTensor::from({1, 3, 3, 1}, {-1, -2, -3, -4, -5, -6, -7, -8, -9})}}, &vars);
  EXPECT_EQ(out.at("max").f, (std::vector<float>{-1, -3, -7, -9}));
  // Averages over the window elements inside the image: (-1-2-4-5)/4, (-3-6)/2, (-7-8)/2, -9.
  EXPECT_EQ(out.at("avg").f, (std::vector<float>{-3, -4.5f, -7.5f, -9}));
}

TEST(CpuBackend, SoftmaxAndCrossEntropy) {
  GraphBuilder b;
  const Value logits = b.infeed("logits", DType::kF32, {2, 3});
  const Value labels = b.infeed("labels", DType::kS32, {2});
  b.output("p", layers::softmax(logits));
  b.output("loss", layers::sparse_softmax_cross_entropy(labels, logits));
  Variables vars;
  const Outputs out = run_once(b,
                               {{"logits", HostTensor::from({2, 3}, {1, 2, 3, 1000, 0, -1000})},
                                {"labels", HostTensor::from_ints({2}, {2, 1})}},
                               &vars);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(out.at("p").f[2], std::exp(3.0) / z, 1e-6);
  EXPECT_FLOAT_EQ(out.at("p").f[3], 1.0f);  // large logits stay finite
  EXPECT_NEAR(out.at("loss").f[0], std::log(z) - 3.0, 1e-6);
  EXPECT_NEAR(out.at("loss").f[1], 1000.0, 1e-3);
}

TEST(CpuBackend, DropoutIsReproducibleAndKeepsTheRightFraction) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {100, 100});
  b.output("y", layers::dropout(b, x, 0.4f, true, 42));
  Variables vars;
  const HostTensor ones = HostTensor::from({100, 100}, std::vector<float>(10000, 1.0f));
  const HostTensor a = run_once(b, {{"x", ones}}, &vars, Precision::kFp32, 7).at("y");
  const HostTensor again = run_once(b, {{"x", ones}}, &vars, Precision::kFp32, 7).at("y");
  const HostTensor next = run_once(b, {{"x", ones}}, &vars, Precision::kFp32, 8).at("y");
  EXPECT_EQ(a.f, again.f);
  EXPECT_NE(a.f, next.f);  // another step, another mask
  int kept = 0;
  for (float v : a.f) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(v, 1.0f / 0.6f);
    }
  }
  EXPECT_NEAR(kept / 10000.0, 0.6, 0.02);
}

TEST(CpuBackend, BatchNormUpdatesMovingStatisticsEachStep) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4, 2});
  b.output("y", layers::batch_normalization(b, x, true, 0.5f, 0.0f));
  Variables vars = initial_variables(b.graph());
  const Outputs out =
      run_once(b, {{"x", HostTensor::from({4, 2}, {1, 10, 2, 20, 3, 30, 4, 40})}}, &vars);
  // Column 0: mean 2.5, variance 1.25; normalised -1.342 ... +1.342.
  EXPECT_NEAR(out.at("y").f[0], (1 - 2.5) / std::sqrt(1.25), 1e-5);
  // moving = 0.5 x old + 0.5 x batch.
  EXPECT_FLOAT_EQ(vars["batch_normalization_1/moving_mean"].f[0], 1.25f);
  EXPECT_FLOAT_EQ(vars["batch_normalization_1/moving_mean"].f[1], 12.5f);
  // The moving variance takes the batch's with Bessel's correction (4 / 3 here), as
  // FusedBatchNormV3's variance output.
  EXPECT_FLOAT_EQ(vars["batch_normalization_1/moving_variance"].f[0], 0.5f + 0.5f * 1.25f * 4 / 3);
}

// Variables are read in place during a step, and updates written after its last node, in the
// graph's order: two variables that take each other's value swap, one updated twice keeps the
// last update, and a variable read as an output and by a reshape keeps its value.
TEST(CpuBackend, UpdatesToOtherVariablesOldValuesSwapThem) {
  GraphBuilder b;
  const Value a = b.variable("a", DType::kF32, {2, 2}, Initializer{});
  const Value c = b.variable("c", DType::kF32, {2, 2}, Initializer{});
  b.update(a, c);
  b.update(c, a);
  // Updated twice: the last update wins, whichever reads a variable in place.
  const Value d = b.variable("d", DType::kF32, {2, 2}, Initializer{});
  b.update(d, a);
  b.update(d, c * 2.0f);
  b.output("a_flat", b.reshape(a, {4}));
  b.output("a", a);
  Variables vars{{"a", HostTensor::from({2, 2}, {1, 2, 3, 4})},
                 {"c", HostTensor::from({2, 2}, {5, 6, 7, 8})},
                 {"d", HostTensor::from({2, 2}, {0, 0, 0, 0})}};
  const Outputs out = run_once(b, {}, &vars);
  EXPECT_EQ(vars.at("a").f, (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(vars.at("c").f, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(vars.at("d").f, (std::vector<float>{10, 12, 14, 16}));
  EXPECT_EQ(out.at("a_flat").f, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(out.at("a").f, (std::vector<float>{1, 2, 3, 4}));
}

TEST(CpuBackend, MxuPrecisionRoundsMatmulInputsOnly) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {1, 1});
  const Value w = b.infeed("w", DType::kF32, {1, 1});
  b.output("y", b.matmul(a, w));
  b.output("z", a * w);
  Variables vars;
  const Feeds feeds{{"a", HostTensor::from({1, 1}, {1.00390625f + 1e-4f})},
                    {"w", HostTensor::from({1, 1}, {3.0f})}};
  const Outputs fp32 = run_once(b, feeds, &vars, Precision::kFp32);
  const Outputs mxu = run_once(b, feeds, &vars, Precision::kMxu);
  EXPECT_FLOAT_EQ(fp32.at("y").f[0], (1.00390625f + 1e-4f) * 3.0f);
  // 1.0040... rounds to the bf16 1.0078125 (nearest of 1.0 and 1.0078125): 3.0234375.
  EXPECT_FLOAT_EQ(mxu.at("y").f[0], 1.0078125f * 3.0f);
  EXPECT_EQ(mxu.at("z").f, fp32.at("z").f);
}

// The cpu backend is a numerics reference: its matmuls round the same on every host, whatever
// its CPU's caches and threads (fix_gemm_blocking). A product 1000 deep, whose sums Eigen cuts
// into partial sums, gives bitwise the same on 1, 2 and 3 threads after Eigen was told another
// CPU's cache sizes (after a first loop, as a program that sets its own would), and its bits are
// pinned: a host that cut the sums otherwise fails here.
TEST(CpuBackend, MatmulsRoundTheSameOnAnyHost) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {300, 1000});
  const Value w = b.infeed("w", DType::kF32, {1000, 200});
  b.output("y", b.matmul(a, w));
  Variables vars;
  const Feeds feeds{{"a", random_tensor(Shape{300, 1000}, 1)},
                    {"w", random_tensor(Shape{1000, 200}, 2)}};
  run_once(b, feeds, &vars);
  Eigen::setCpuCacheSizes(48 << 10, 2 << 20, 105 << 20);  // an Intel Xeon's, not this host's
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    const std::vector<float> y = run_once(b, feeds, &vars).at("y").f;
    if (first.empty()) first = y;
    EXPECT_EQ(y, first) << threads << " threads";
  }
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the result's bits
  for (float v : first) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    hash = (hash ^ bits) * 1099511628211ull;
  }
  EXPECT_EQ(hash, 2374342951631363060ull);
}

// A product of few outputs and a long depth (a weight gradient) has its depth blocks summed on
// the host's threads, then added in block order (gemm.cc): bitwise one Eigen call's result, on
// 1 to 3 threads, for the lhs read transposed and as stored, a depth that is no multiple of
// Eigen's block and output shapes off Eigen's register panels; and the shapes whose blocks
// Eigen would sum by another rule (one output row or column: a matrix-vector product; under 20
// rows, columns and terms; two rows and a short last block) are left whole.
TEST(CpuBackend, LongDepthsSplitIntoEigensBlocksKeepEveryBit) {
  using Dims = std::tuple<int64_t, int64_t, int64_t>;
  for (const auto& [rows, depth, cols] :
       {Dims{144, 20000, 16}, Dims{37, 9001, 13}, Dims{2, 3000, 20}, Dims{4, 10081, 3},
        Dims{64, 4096, 1}, Dims{1, 3072, 10}}) {
    for (bool transposed : {true, false}) {
      GraphBuilder b;
      const Value a =
          b.infeed("a", DType::kF32, transposed ? Shape{depth, rows} : Shape{rows, depth});
      const Value w = b.infeed("w", DType::kF32, {depth, cols});
      b.output("y", b.matmul(transposed ? b.transpose(a, {1, 0}) : a, w));
      Variables vars;
      const Feeds feeds{
          {"a", random_tensor(transposed ? Shape{depth, rows} : Shape{rows, depth}, 1)},
          {"w", random_tensor(Shape{depth, cols}, 2)}};
      run_once(b, feeds, &vars);  // fixes Eigen's blocking, as every cpu loop does
      using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      const Eigen::Map<const RowMajor> wm(feeds.at("w").f.data(), depth, cols);
      RowMajor want(rows, cols);
      if (transposed) {
        want.noalias() =
            Eigen::Map<const RowMajor>(feeds.at("a").f.data(), depth, rows).transpose() * wm;
      } else {
        want.noalias() = Eigen::Map<const RowMajor>(feeds.at("a").f.data(), rows, depth) * wm;
      }
      const std::vector<float> expected(want.data(), want.data() + want.size());
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        EXPECT_EQ(run_once(b, feeds, &vars).at("y").f, expected)
            << rows << " x " << depth << " x " << cols << (transposed ? ", lhs transposed, " : ", ")
            << threads << " threads";
      }
    }
  }
}

// A convolution's patches that only its forward product and its kernel gradient read are made
// on the fly by those products (plan.cc's fold_patches, gemm.h's LhsSource): the results are
// bitwise those of the materialized patches (here an output too, so not folded), on 1 to 3
// threads, in fp32 and mxu.
TEST(CpuBackend, PatchesMadeOnTheFlyEqualMaterializedOnes) {
  auto build = [](bool patches_output) {
    auto b = std::make_unique<GraphBuilder>();
    const Value x = b->infeed("x", DType::kF32, {8, 20, 20, 3});
    const Value kernel =
        b->variable("kernel", DType::kF32, {3, 3, 3, 4}, Initializer{InitKind::kGlorotUniform});
    Window w;
    w.kh = w.kw = 3;
    w.same = true;
    const Value patches = b->extract_patches(x, w);
    const Value y = b->matmul(patches, b->reshape(kernel, {27, 4}));
    const Value loss = layers::reduce_mean(b->unary(Op::kSquare, y), {0, 1, 2, 3});
    auto grads = gradients(*b, loss, {kernel});
    EXPECT_TRUE(grads.ok()) << grads.status();
    b->output("y", y);
    b->output("grad", (*grads)[0]);
    if (patches_output) b->output("patches", patches);
    const cpu::ExecutionPlan plan = cpu::plan_execution(b->graph());
    EXPECT_EQ(plan.nodes[static_cast<size_t>(patches.id)].folded, !patches_output);
    return b;
  };
  const auto folded = build(false), materialized = build(true);
  Variables vars = initial_variables(folded->graph());
  const Feeds feeds{{"x", random_tensor(Shape{8, 20, 20, 3}, 5)}};
  for (Precision precision : {Precision::kFp32, Precision::kMxu}) {
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      Variables v1 = vars, v2 = vars;
      const Outputs got = run_once(*folded, feeds, &v1, precision);
      const Outputs want = run_once(*materialized, feeds, &v2, precision);
      EXPECT_EQ(got.at("y").f, want.at("y").f)
          << kPrecisions.name(precision) << ", " << threads << " threads";
      EXPECT_EQ(got.at("grad").f, want.at("grad").f)
          << kPrecisions.name(precision) << ", " << threads << " threads";
    }
  }
}

// A matmul operand that is a transpose of the last two axes is read in place (plan.h), and the
// product is bitwise the one of the transposed copy: each transpose here is also an output in
// one graph, so there it is copied, and only read through in the other. Products 1000 deep
// (Eigen cuts them into partial sums), at rank 2 and batched, fp32 and mxu.
TEST(CpuBackend, MatmulsOfTransposesEqualThoseOfTheirCopies) {
  const Feeds feeds{{"a", random_tensor(Shape{1000, 300}, 1)},
                    {"w", random_tensor(Shape{200, 1000}, 2)},
                    {"q", random_tensor(Shape{3, 40, 1000}, 3)},
                    {"k", random_tensor(Shape{3, 50, 1000}, 4)}};
  auto products = [&](bool copied, Precision precision) {
    GraphBuilder b;
    const Value a_t = b.transpose(b.infeed("a", DType::kF32, {1000, 300}), {1, 0});
    const Value w_t = b.transpose(b.infeed("w", DType::kF32, {200, 1000}), {1, 0});
    const Value q = b.infeed("q", DType::kF32, {3, 40, 1000});
    const Value k_t = b.transpose(b.infeed("k", DType::kF32, {3, 50, 1000}), {0, 2, 1});
    const Value q_t = b.transpose(q, {0, 2, 1});
    b.output("both", b.matmul(a_t, w_t));   // [300, 200]
    b.output("batched", b.matmul(q, k_t));  // [3, 40, 50]
    b.output("lhs", b.matmul(q_t, q));      // [3, 1000, 1000]
    if (copied) {
      for (const auto& [name, t] :
           {std::pair{"a_t", a_t}, {"w_t", w_t}, {"k_t", k_t}, {"q_t", q_t}})
        b.output(name, t);
    }
    Variables vars;
    return run_once(b, feeds, &vars, precision);
  };
  for (Precision precision : {Precision::kFp32, Precision::kMxu}) {
    const Outputs read_through = products(false, precision);
    const Outputs copied = products(true, precision);
    for (const char* name : {"both", "batched", "lhs"})
      EXPECT_EQ(read_through.at(name).f, copied.at(name).f)
          << name << " " << kPrecisions.name(precision);
  }
}

// A broadcast that binary ops alone read is read through its strides (plan.h), bitwise as its
// copy: a broadcast that is also an output is copied in one graph. Along an inner axis, and one
// numpy-broadcast again against an operand of higher rank.
TEST(CpuBackend, BinaryOpsOfBroadcastsEqualThoseOfTheirCopies) {
  const Feeds feeds{{"m", random_tensor(Shape{4, 5}, 1)},
                    {"x", random_tensor(Shape{4, 3, 5}, 2)},
                    {"v", random_tensor(Shape{5}, 3)},
                    {"y", random_tensor(Shape{2, 3, 5}, 4)}};
  auto results = [&](bool copied) {
    GraphBuilder b;
    const Value m = b.broadcast(b.infeed("m", DType::kF32, {4, 5}), Shape{4, 3, 5}, {0, 2});
    const Value v = b.broadcast(b.infeed("v", DType::kF32, {5}), Shape{3, 5}, {1});
    b.output("inner", b.infeed("x", DType::kF32, {4, 3, 5}) - m);
    b.output("numpy", v / b.infeed("y", DType::kF32, {2, 3, 5}));
    if (copied) {
      b.output("m", m);
      b.output("v", v);
    }
    Variables vars;
    return run_once(b, feeds, &vars);
  };
  const Outputs read_through = results(false);
  const Outputs copied = results(true);
  for (const char* name : {"inner", "numpy"})
    EXPECT_EQ(read_through.at(name).f, copied.at(name).f) << name;
  EXPECT_EQ(read_through.at("inner").f[7], feeds.at("x").f[7] - feeds.at("m").f[2]);
}

// Which nodes the plan folds: transposes that matmuls alone read and broadcasts that binary
// elementwise ops alone read, neither an output.
TEST(CpuPlan, OnlyTransposesAndBroadcastsTheirReadersCanReadThroughAreFolded) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {4, 3});
  const Value read_through = b.transpose(a, {1, 0});  // [3, 4], read by two matmuls
  const Value also_added = b.transpose(a, {1, 0});    // read by a matmul and an add
  b.output("y", b.matmul(read_through, a));           // [3, 3]
  b.output("x", b.matmul(a, read_through));           // [4, 4]
  b.output("w", b.matmul(also_added, a));
  b.output("z", also_added + also_added);
  const Value spread = b.broadcast(b.infeed("s", DType::kF32, {3}), Shape{4, 3}, {1});
  const Value multiplied = b.broadcast(b.infeed("t", DType::kF32, {3}), Shape{3, 3}, {1});
  b.output("spread", a + spread);                         // folded: an add alone reads it
  b.output("product", b.matmul(multiplied, multiplied));  // copied: a matmul reads it
  const cpu::ExecutionPlan plan = cpu::plan_execution(b.graph());
  EXPECT_TRUE(plan.nodes[static_cast<size_t>(spread.id)].folded);
  EXPECT_FALSE(plan.nodes[static_cast<size_t>(multiplied.id)].folded);
  EXPECT_TRUE(plan.nodes[static_cast<size_t>(read_through.id)].folded);
  EXPECT_FALSE(plan.nodes[static_cast<size_t>(also_added.id)].folded);
  int folded_reads = 0;
  for (const auto& node : plan.nodes)
    folded_reads += node.matmul.a_transposed + node.matmul.b_transposed;
  EXPECT_EQ(folded_reads, 2);
}

// A node no output or update reads (autodiff's gradient of a constant scale) is dead: never
// computed, and its reads keep no value alive.
TEST(CpuPlan, NodesNoResultReadsAreDead) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {4, 3});
  const Value scaled = x * 0.25f;
  const Value unused = b.reduce(Op::kReduceSum, scaled * x, {0, 1});  // d(sum)/d(0.25)
  const Value y = b.unary(Op::kExp, scaled);
  b.output("y", y);
  const cpu::ExecutionPlan plan = cpu::plan_execution(b.graph());
  const auto at = [](Value v) { return static_cast<size_t>(v.id); };
  EXPECT_TRUE(plan.nodes[at(unused)].dead);
  EXPECT_TRUE(plan.nodes[static_cast<size_t>(b.graph().node(unused.id).inputs[0])].dead);
  EXPECT_FALSE(plan.nodes[at(scaled)].dead);
  EXPECT_FALSE(plan.nodes[at(y)].dead);
  EXPECT_FALSE(plan.nodes[at(x)].dead);
  EXPECT_EQ(plan.last_use[at(scaled)], y.id);  // not the dead product's
  EXPECT_EQ(plan.last_use[at(x)], scaled.id);
  Variables vars;
  HostTensor fed = random_tensor({4, 3}, 3);
  const Outputs out = run_once(b, {{"x", fed}}, &vars);
  ASSERT_EQ(out.at("y").f.size(), 12u);
  EXPECT_EQ(out.at("y").f[5], std::exp(fed.f[5] * 0.25f));
}

TEST(CpuBackend, MissingOrMisshapedInputsAreNamed) {
  GraphBuilder b;
  b.output("y", b.infeed("image", DType::kF32, {2, 3}) * 2.0f);
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(b.graph(), {});
  Variables vars;
  auto none = (*backend)->run(**exe, vars, {Feeds{}}, 5);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()),
              ::testing::HasSubstr("step 5: no batch for infeed 'image'"));
  auto wrong =
      (*backend)->run(**exe, vars, {{{"image", HostTensor::zeros(DType::kF32, {3, 2})}}}, 0);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()),
              ::testing::HasSubstr("infeed 'image' takes f32[2, 3]; the batch is f32[3, 2]"));
  EXPECT_EQ((*backend)
                ->compile(b.graph(), {Precision::kFp32, 2, AllReduceAlgorithm::kTorus})
                .status()
                .message(),
            "cpu backend: allreduce 'torus' is not supported (cpu: ring order only)");
  EXPECT_EQ((*backend)->compile(b.graph(), {Precision::kFp32, 0}).status().message(),
            "cpu backend: replicas must be at least 1");
  EXPECT_EQ(make_backend("abacus").status().code(), absl::StatusCode::kNotFound);
}

TEST(CpuBackend, InitializersFollowTheirDistributions) {
  GraphBuilder b;
  b.variable("glorot", DType::kF32, {200, 300}, {InitKind::kGlorotUniform, 0, 1, 1});
  b.variable("he", DType::kF32, {3, 3, 64, 64}, {InitKind::kHeNormal, 0, 1, 1});
  b.variable("tn", DType::kF32, {10000}, {InitKind::kTruncatedNormal, 0, 0.1f, 1});
  const Variables v = initial_variables(b.graph());
  const double glorot_limit = std::sqrt(6.0 / 500.0);
  for (float x : v.at("glorot").f) EXPECT_LE(std::abs(x), glorot_limit);
  double sq = 0;
  for (float x : v.at("he").f) sq += x * x;
  EXPECT_NEAR(std::sqrt(sq / v.at("he").f.size()), std::sqrt(2.0 / (9 * 64)), 0.005);
  for (float x : v.at("tn").f) EXPECT_LE(std::abs(x), 0.2f + 1e-6f);
  // Same seed and name: same values.
  EXPECT_EQ(initial_variables(b.graph()).at("glorot").f, v.at("glorot").f);
}

}  // namespace cpu_backend_test
}  // namespace tpusim::runtime
