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

namespace tpusim::runtime {
namespace tpusim_backend_test {

using opcheck::parse_backend_spec;

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
  auto run_on = [&](const char* name, const char* precision, Variables* v) {
    auto backend = make_backend(name);
    auto exe = (*backend)->compile(b.graph(), {precision});
    EXPECT_TRUE(exe.ok()) << exe.status();
    auto out = (*backend)->run(**exe, *v, feeds, 100);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  };
  Variables on_cpu = initial_variables(b.graph());
  Variables on_tpu = on_cpu;
  const auto cpu = run_on("cpu", "mxu", &on_cpu);
  const auto tpu = run_on("tpusim", "fp32", &on_tpu);
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

// One step of `graph` on the tpusim backend from its initial variables: the first replica's
// outputs (none, with the failure reported, when it does not compile or run).
Outputs run_once(const Graph& graph, const CompileOptions& options,
                 const std::vector<Feeds>& feeds) {
  auto backend = make_backend("tpusim");
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return {};
  auto exe = (*backend)->compile(graph, options);
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  Variables v = initial_variables(graph);
  auto out = (*backend)->run(**exe, v, feeds, 0);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at(0) : Outputs{};
}

// Fused convolutions (patches only in VMEM) compute what extract_patches, the matmuls and
// patches_to_image compute as separate fragments. The forward outputs and the input gradients
// are bit for bit the same (the MXUs sum the same depth chunks in the same order); a kernel
// gradient sums its pixels tile by tile, so its f32 sums round differently. Three convolutions
// over 20 images of 32x32x16, 8 to a VMEM tile (3 tiles): SAME at stride 1 (the flat im2col) and
// VALID at stride 2 (one copy per image row).
TEST(TpusimBackend, FusedConvolutionsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {20, 32, 32, 16});
  const Value labels = b.infeed("labels", DType::kS32, {20});
  using layers::Activation;
  using layers::Padding;
  Value h = layers::conv2d(b, x, 16, 3, 1, Padding::kSame, Activation::kRelu, 1);
  h = layers::conv2d(b, h, 16, 3, 1, Padding::kSame, Activation::kRelu, 2);
  h = layers::conv2d(b, h, 8, 3, 2, Padding::kValid, Activation::kRelu, 3);
  const Value logits = layers::dense(b, b.reshape(h, {20, 15 * 15 * 8}), 4, Activation::kNone, 4);
  const Value loss = layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = gradients(b, loss, vars);
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("loss", loss);
  for (size_t i = 0; i < vars.size(); ++i)
    b.output(b.graph().node(vars[i].id).attrs.name, (*grads)[i]);
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {20, 32, 32, 16}}, {"labels", DType::kS32, {20}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 3)};

  CompileOptions fused_options, unfused_options;
  unfused_options.fuse_convolutions = false;
  const Outputs fused = run_once(b.graph(), fused_options, feeds);
  const Outputs unfused = run_once(b.graph(), unfused_options, feeds);
  ASSERT_EQ(fused.size(), 9u);  // the loss and 4 kernels' and 4 biases' gradients
  EXPECT_EQ(fused.at("loss").f[0], unfused.at("loss").f[0]);
  int rounded = 0;
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    const bool kernel =
        name.find("conv2d") != std::string::npos && name.find("kernel") != std::string::npos;
    float scale = 0;
    for (float v : value.f) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < f.size(); ++i) {
      if (!kernel) {
        ASSERT_EQ(f[i], value.f[i]) << name << "[" << i << "]";
      } else {
        ASSERT_NEAR(f[i], value.f[i], 1e-5f * scale) << name << "[" << i << "]";
        rounded += f[i] != value.f[i];
      }
    }
  }
  EXPECT_GT(rounded, 0);  // the kernel gradients really were summed another way
}

// Fused max pools (reduce-window and its gradient on strided views in VMEM) compute bit for bit
// what extract_patches, reduce_max, the gradient's masks and patches_to_image compute as separate
// fragments, ties included, and a gradient of -0 (a window's other pixels, times a negative
// gradient) becomes +0 as patches_to_image's sum into zeros makes it: a pool of small integers
// (levels) has windows with two, three or four equal maxima, which share the gradient, and the
// ReLUs leave windows of zeros. 24 images of 64x64x8, 11 to a gradient tile (3 tiles); a pool of
// pooled values; and a 3x3 SAME pool at stride 2, which does not tile its images and stays unfused.
TEST(TpusimBackend, FusedMaxPoolsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {24, 64, 64, 8});
  const Value labels = b.infeed("labels", DType::kS32, {24});
  const Value levels = b.cast(b.infeed("levels", DType::kS32, {24, 16, 16, 8}), DType::kF32);
  using layers::Activation;
  using layers::Padding;
  const Value features = layers::conv2d(b, x, 8, 3, 1, Padding::kSame, Activation::kRelu, 1);
  const Value pooled = layers::max_pooling2d(b, features, 2, 2);
  Value h = layers::conv2d(b, pooled, 8, 3, 1, Padding::kSame, Activation::kRelu, 2);
  h = layers::max_pooling2d(b, layers::max_pooling2d(b, h, 2, 2), 2, 2);
  h = layers::max_pooling2d(b, h, 3, 2, Padding::kSame);
  const Value logits = layers::dense(b, b.reshape(h, {24, 4 * 4 * 8}), 4, Activation::kNone, 3);
  const Value pooled_levels = layers::max_pooling2d(b, levels, 2, 2);
  const Value loss =
      layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0}) +
      layers::reduce_mean(b.unary(Op::kSquare, pooled_levels), {0, 1, 2, 3});
  std::vector<Value> wrt{levels, features};
  for (int id : b.graph().variables()) wrt.push_back(Value{id, &b});
  auto grads = gradients(b, loss, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("loss", loss);
  b.output("pooled", pooled);
  b.output("levels_grad", (*grads)[0]);
  b.output("features_grad", (*grads)[1]);  // the first pool's gradient itself
  for (size_t i = 2; i < wrt.size(); ++i)
    b.output(b.graph().node(wrt[i].id).attrs.name, (*grads)[i]);
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {24, 64, 64, 8}},
              {"labels", DType::kS32, {24}, 0, 4},
              {"levels", DType::kS32, {24, 16, 16, 8}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};

  CompileOptions fused_options, unfused_options;
  unfused_options.fuse_pools = false;
  const Outputs fused = run_once(b.graph(), fused_options, feeds);
  const Outputs unfused = run_once(b.graph(), unfused_options, feeds);
  // The loss, the pooled values, two pools' gradients, 3 kernels' and 3 biases' gradients.
  ASSERT_EQ(fused.size(), 10u);
  int zeros = 0;
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(std::memcmp(&f[i], &value.f[i], 4), 0)
          << name << "[" << i << "]: " << f[i] << " against " << value.f[i];
    }
    if (name == "pooled") zeros = static_cast<int>(std::count(f.begin(), f.end(), 0.0f));
  }
  EXPECT_GT(zeros, 0);  // windows of ReLU zeros
  // Shared gradients: a tie of n maxima gives each 2 m / n / elements, m the window's maximum.
  const std::vector<float>& levels_grad = fused.at("levels_grad").f;
  const float unit = 2.0f / (24 * 8 * 8 * 8);
  std::set<float> shares;
  for (float v : levels_grad) {
    if (v != 0) shares.insert(v / unit);
  }
  for (float share : {3.0f / 2, 3.0f / 3, 3.0f / 4, 2.0f / 2}) {
    bool found = false;
    for (float v : shares) found |= std::abs(v - share) < 1e-4f;
    EXPECT_TRUE(found) << "no tie with the share " << share;
  }
}

// Runs `graph` (no variables) once on tpusim and on the cpu backend and expects its `outputs`
// outputs bit for bit the same.
void expect_the_cpus_bits(const Graph& graph, const std::vector<Feeds>& feeds, size_t outputs) {
  const Outputs tpu = run_once(graph, CompileOptions{}, feeds);
  auto cpu_backend = make_backend("cpu");
  ASSERT_TRUE(cpu_backend.ok());
  auto exe = (*cpu_backend)->compile(graph, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Variables none;
  auto cpu = (*cpu_backend)->run(**exe, none, feeds, 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(tpu.size(), outputs);
  ASSERT_EQ(cpu->at(0).size(), outputs);
  for (const auto& [name, value] : cpu->at(0)) {
    const std::vector<float>& f = tpu.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
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
  expect_the_cpus_bits(b.graph(), {opcheck::make_feeds(c, 11)}, 4);
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
  expect_the_cpus_bits(b.graph(), feeds, cases.size());
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
  expect_the_cpus_bits(b.graph(), feeds, 3);
}

// Reductions that compute their elementwise inputs in VMEM (lower_fused_reduction) against the
// same graph with those inputs written to HBM first: over the last axis bit for bit (the same
// per-row reduce), and down the rows too when one tile holds them all (one reduce of them all) or
// for a max (exact in any order); a sum over many tiles adds the tiles' partial rows in order, so
// it rounds differently from the unfused partitions, within f32 rounding of the sum.
TEST(TpusimBackend, FusedReductionsComputeWhatTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 40});
  const Value y = b.infeed("y", DType::kF32, {16, 8, 8, 16});
  const Value m = b.infeed("m", DType::kF32, {16});
  const Value z = b.infeed("z", DType::kF32, {256, 32, 32, 16});
  b.output("row_sums", b.reduce(Op::kReduceSum, b.unary(Op::kExp, x) * 0.5f + x, {1}));
  b.output("row_maxima", b.reduce(Op::kReduceMax, x * x + -1.0f, {1}));
  const Value centred = y - b.broadcast(m, y.shape(), {3});
  b.output("variance", b.reduce(Op::kReduceSum, centred * centred, {0, 1, 2}));
  b.output("squares", b.reduce(Op::kReduceSum, b.unary(Op::kSquare, z), {0, 1, 2}));
  b.output("maxima", b.reduce(Op::kReduceMax, z * 2.0f, {0, 1, 2}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {300, 40}},
              {"y", DType::kF32, {16, 8, 8, 16}},
              {"m", DType::kF32, {16}},
              {"z", DType::kF32, {256, 32, 32, 16}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
  CompileOptions unfused_options;
  unfused_options.fuse_reductions = false;
  const Outputs fused = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs unfused = run_once(b.graph(), unfused_options, feeds);
  ASSERT_EQ(fused.size(), 5u);
  for (const auto& [name, value] : unfused) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    if (name != "squares") {
      EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
      continue;
    }
    for (size_t i = 0; i < f.size(); ++i)
      EXPECT_NEAR(f[i], value.f[i], 1e-5f * std::abs(value.f[i])) << name << "[" << i << "]";
  }
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

// Recomputing a shared producer in each reader's fragment computes the same values bit for bit:
// a batch-norm training step (whose centred values and normalised ones several gradient
// fragments read) with and without, loss and every gradient.
TEST(TpusimBackend, RecomputedProducersComputeWhatTheMaterialisedOnesDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32, 8, 8, 16});
  const Value labels = b.infeed("labels", DType::kS32, {32});
  using layers::Activation;
  using layers::Padding;
  Value h = layers::conv2d(b, x, 16, 3, 1, Padding::kSame, Activation::kNone, 1);
  h = b.unary(Op::kRelu, layers::batch_normalization(b, h, true));
  const Value logits = layers::dense(b, b.reshape(h, {32, 8 * 8 * 16}), 4, Activation::kNone, 2);
  const Value loss = layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
  std::vector<Value> wrt{x};
  for (int id : b.graph().variables()) {
    if (b.graph().node(id).attrs.name.find("moving_") == std::string::npos)
      wrt.push_back(Value{id, &b});
  }
  auto grads = gradients(b, loss, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("loss", loss);
  for (size_t i = 0; i < wrt.size(); ++i) b.output("grad" + std::to_string(i), (*grads)[i]);
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {32, 8, 8, 16}}, {"labels", DType::kS32, {32}, 0, 4}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 9)};
  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_GE(step->recomputed_nodes, 3u);  // the batch norm's shared values
  CompileOptions kept;
  kept.recompute_shared_producers = false;
  const Outputs recomputed = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs materialised = run_once(b.graph(), kept, feeds);
  ASSERT_EQ(recomputed.size(), wrt.size() + 1);
  for (const auto& [name, value] : materialised) {
    const std::vector<float>& f = recomputed.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
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
  for (const char* precision : {"fp32", "mxu"}) {
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
            << precision << " case " << i << " entry " << e;
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
  auto cpu = make_backend("cpu");
  auto exe = (*cpu)->compile(b.graph(), {});
  ASSERT_TRUE(exe.ok());
  Variables none;
  auto want = (*cpu)->run(**exe, none, {feeds}, 0);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const char* name : {"rows", "sums", "erf"}) {
    const std::vector<float>& got = tpu.at(name).f;
    const std::vector<float>& ref = (*want)[0].at(name).f;
    ASSERT_EQ(got.size(), ref.size()) << name;
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), 4 * got.size()), 0) << name;
  }
  // The sums are not the trivial ones: some row took many updates.
  int most = 0;
  std::vector<int> named(300, 0);
  for (int32_t i : feeds.at("ids").i) most = std::max(most, ++named[std::clamp(i, 0, 299)]);
  EXPECT_GE(most, 20);  // the clamped ends
}

}  // namespace tpusim_backend_test
}  // namespace tpusim::runtime
