// The gpu backend. Everywhere: how it reports itself (the registry's row, make_backend's error
// when no device is usable). With a usable GPU: every opcheck case against the cpu backend, and
// the promises of gpu_backend.h (reductions, rng and dropout masks, copies and the replicas'
// ring sum bit for bit; matmuls and training within rounding). Without one those tests skip,
// saying why.
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/registry.h"
#include "runtime/gpu/cuda_probe.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"

#if defined(TPUSIM_HAVE_CUDA)
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

namespace tpusim::runtime {
namespace gpu_backend_test {

// The gpu backend, or the reason the test skips.
#define GPU_OR_SKIP(backend)                                                   \
  auto backend##_made = make_backend("gpu");                                   \
  if (!backend##_made.ok()) GTEST_SKIP() << backend##_made.status().message(); \
  Backend& backend = **backend##_made

TEST(GpuBackend, RegistryRowSaysWhetherItIsBuiltAndWhyItCannotRun) {
  const auto& rows = registered_backends();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "tpusim");
  EXPECT_EQ(rows[1].name, "cpu");
  EXPECT_TRUE(rows[0].availability().available && rows[1].availability().available);
  auto declared = find_backend("gpu");
  ASSERT_TRUE(declared.ok()) << declared.status();
  const BackendAvailability gpu = (*declared)->availability();
  EXPECT_EQ(gpu.built, kCudaBuilt);
  const gpu::CudaProbe probe = gpu::probe_cuda();
  EXPECT_EQ(gpu.available, probe.reason.empty() && !probe.devices.empty());
  if (!gpu.available) {
    EXPECT_FALSE(gpu.reason.empty());
    EXPECT_EQ(gpu.reason, probe.reason);
  }
  EXPECT_EQ(gpu.available, make_backend("gpu").ok());
}

TEST(GpuBackend, UnavailableCarriesTheProbesReason) {
  auto backend = make_backend("gpu");
  if (backend.ok()) {
    EXPECT_EQ((*backend)->name(), "gpu");
    GTEST_SKIP() << "a GPU is usable here: nothing to refuse";
  }
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(backend.status().message());
  EXPECT_EQ(message, "gpu backend unavailable: " + gpu::probe_cuda().reason);
  if (!kCudaBuilt) {
    EXPECT_NE(message.find("built without CUDA"), std::string::npos) << message;
  }
}

TEST(GpuBackend, EveryOpcheckCasePassesAgainstTheCpu) {
  GPU_OR_SKIP(gpu);
  (void)gpu;
  for (const opcheck::OpCase& c : opcheck::all_cases()) {
    for (Precision precision : {Precision::kFp32, Precision::kMxu}) {
      auto results = opcheck::run_case(c, {"gpu", precision}, 1, {"cpu", precision});
      ASSERT_TRUE(results.ok()) << c.op << " " << c.shape << ": " << results.status();
      for (const opcheck::CaseResult& r : *results) {
        EXPECT_TRUE(r.passed) << r.op << " " << r.shape << " " << r.backend << " " << r.tensor
                              << ": rel " << r.max_rel_error << " > " << r.tolerance << " worst "
                              << r.worst;
      }
    }
  }
}

// Runs `g` once on `backend` at `step`; the outputs.
Outputs run_on(Backend& backend, const Graph& g, const Feeds& feeds, uint64_t step,
               Precision precision = Precision::kFp32) {
  auto exe = backend.compile(g, {precision});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  Variables vars = initial_variables(g);
  auto out = backend.run(**exe, vars, {feeds}, step);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Outputs{};
}

HostTensor uniform(const Shape& s, uint32_t seed) {
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, s}};
  return opcheck::make_feeds(c, seed).at("x");
}

TEST(GpuBackend, ReductionsAndCopiesMatchTheCpuBitForBit) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {5, 7, 9});
  for (const auto& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}}) {
    b.output(str_cat("sum", str_join(axes, "")), b.reduce(Op::kReduceSum, x, axes));
    b.output(str_cat("max", str_join(axes, "")), b.reduce(Op::kReduceMax, x, axes));
  }
  b.output("transpose", b.transpose(x, {2, 0, 1}));
  b.output("pad", b.pad(x, {1, 0, 2}, {0, 3, 1}));
  b.output("argmax", b.argmax(x, 1));
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Feeds feeds{{"x", uniform({5, 7, 9}, 3)}};
  auto cpu = make_backend("cpu");
  const Outputs want = run_on(**cpu, b.graph(), feeds, 0);
  const Outputs got = run_on(gpu, b.graph(), feeds, 0);
  for (const auto& [name, t] : want) {
    EXPECT_EQ(got.at(name).f, t.f) << name;
    EXPECT_EQ(got.at(name).i, t.i) << name;
  }
}

// Reductions past one block and past one level of the tree (element_math.h): 90,000 terms to a
// scalar (352 blocks, then 2 groups), 70,000 down columns, and a middle run of axes.
TEST(GpuBackend, LongReductionsMatchTheCpuBitForBit) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 300});
  const Value y = b.infeed("y", DType::kF32, {70000, 2});
  const Value z = b.infeed("z", DType::kF32, {3, 40000, 2});
  b.output("all", b.reduce(Op::kReduceSum, x, {0, 1}));
  b.output("columns", b.reduce(Op::kReduceSum, y, {0}));
  b.output("middle", b.reduce(Op::kReduceSum, z, {1}));
  b.output("max", b.reduce(Op::kReduceMax, y, {0}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  const Feeds feeds{{"x", uniform({300, 300}, 4)},
                    {"y", uniform({70000, 2}, 5)},
                    {"z", uniform({3, 40000, 2}, 6)}};
  auto cpu = make_backend("cpu");
  const Outputs want = run_on(**cpu, b.graph(), feeds, 0);
  const Outputs got = run_on(gpu, b.graph(), feeds, 0);
  for (const auto& [name, t] : want) EXPECT_EQ(got.at(name).f, t.f) << name;
}

// Products of few outputs and a long K have their sums split along K (gemm_call.h): plain, with
// the rhs read transposed, and with the lhs read transposed, on one replica (a strided batch of
// chunks) and on three (groups of chunks, by pointers), two steps each, within f32 rounding of
// the cpu's sums (a chunk read from the wrong place is off by about the sums' own size).
TEST(GpuBackend, SplitSumsFollowTheCpu) {
  GPU_OR_SKIP(gpu);
  constexpr int64_t kTerms = 65536;
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {16, kTerms});
  const Value w = b.infeed("w", DType::kF32, {kTerms, 8});
  const Value wt = b.infeed("wt", DType::kF32, {8, kTerms});
  const Value xt = b.infeed("xt", DType::kF32, {kTerms, 64});
  const Value v = b.infeed("v", DType::kF32, {kTerms, 64});
  b.output("plain", b.matmul(x, w));
  b.output("rhs_transposed", b.matmul(x, b.transpose(wt, {1, 0})));
  b.output("lhs_transposed", b.matmul(b.transpose(xt, {1, 0}), v));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto feeds_for = [](uint32_t seed) {
    return Feeds{{"x", uniform({16, kTerms}, seed)},
                 {"w", uniform({kTerms, 8}, seed + 1)},
                 {"wt", uniform({8, kTerms}, seed + 2)},
                 {"xt", uniform({kTerms, 64}, seed + 3)},
                 {"v", uniform({kTerms, 64}, seed + 4)}};
  };
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (const uint32_t replicas : {1u, 3u}) {
    auto cpu_exe = (*cpu)->compile(b.graph(), {Precision::kFp32, replicas});
    auto gpu_exe = gpu.compile(b.graph(), {Precision::kFp32, replicas});
    ASSERT_TRUE(cpu_exe.ok() && gpu_exe.ok());
    std::vector<LoopStep> steps(2);  // two steps: the second's batches differ from the first's
    for (uint32_t s = 0; s < 2; ++s) {
      for (uint32_t r = 0; r < replicas; ++r)
        steps[s].replicas.push_back(feeds_for(20 * s + 5 * r));
    }
    Variables none_cpu, none_gpu;
    auto want = (*cpu)->run_loop(**cpu_exe, none_cpu, steps, 0);
    auto got = gpu.run_loop(**gpu_exe, none_gpu, steps, 0);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    // Terms uniform in [-1, 1): each sum is about sqrt(K) / 3 = 85 in size, its f32 rounding
    // far under 0.05.
    for (uint32_t s = 0; s < 2; ++s) {
      for (uint32_t r = 0; r < replicas; ++r) {
        for (const auto& [name, t] : want->outputs[s][r]) {
          const HostTensor& g = got->outputs[s][r].at(name);
          ASSERT_EQ(g.f.size(), t.f.size()) << name;
          for (size_t i = 0; i < t.f.size(); ++i)
            ASSERT_NEAR(g.f[i], t.f[i], 0.05)
                << name << " step " << s << " replica " << r << " element " << i;
        }
      }
    }
  }
}

// TPUSIM_GPU_PROFILE names every node that ran, with its time, and the ops' totals.
TEST(GpuBackend, TheProfileNamesEveryNodeThatRan) {
  GPU_OR_SKIP(gpu);
  const std::string path = ::testing::TempDir() + "gpu_profile.txt";
  setenv("TPUSIM_GPU_PROFILE", path.c_str(), 1);
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 100});
  b.output("y", b.reduce(Op::kReduceSum, b.unary(Op::kExp, x), {1}));
  const Feeds feeds{{"x", uniform({64, 100}, 7)}};
  run_on(gpu, b.graph(), feeds, 0);
  unsetenv("TPUSIM_GPU_PROFILE");
  std::ifstream file(path);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("gpu node profile: 1 steps"), std::string::npos) << text;
  for (const char* what : {"(infeed", "(exp", "(reduce_sum", "  exp\n", "  reduce_sum\n"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " in\n" << text;
}

TEST(GpuBackend, RngAndDropoutMasksMatchTheCpuBitForBit) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 100});
  b.output("u", b.rng_uniform({3, 1000}, 77));
  b.output("dropped", layers::dropout(b, x, 0.4f, true, 42));
  const Feeds feeds{{"x", uniform({64, 100}, 4)}};
  auto cpu = make_backend("cpu");
  for (uint64_t step : {0u, 7u, 123456u}) {
    const Outputs want = run_on(**cpu, b.graph(), feeds, step);
    const Outputs got = run_on(gpu, b.graph(), feeds, step);
    EXPECT_EQ(got.at("u").f, want.at("u").f) << "step " << step;
    EXPECT_EQ(got.at("dropped").f, want.at("dropped").f) << "step " << step;
  }
}

// A small regression model trained for a few SGD steps: the losses and weights stay within f32
// rounding of the cpu's (fp32), within bf16's (mxu).
TEST(GpuBackend, TrainingStepsFollowTheCpu) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32, 12});
  const Value y = b.infeed("y", DType::kF32, {32, 3});
  const Value h = layers::dense(b, x, 16, layers::Activation::kRelu, 1);
  const Value err = layers::dense(b, h, 3, layers::Activation::kTanh, 2) - y;
  const Value loss = layers::reduce_mean(err * err, {0, 1});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = gradients(b, loss, vars);
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < vars.size(); ++i) b.update(vars[i], vars[i] - (*grads)[i] * 0.1f);
  b.output("loss", loss);
  ASSERT_TRUE(b.status().ok()) << b.status();
  std::vector<Feeds> batches;
  for (uint32_t s = 0; s < 5; ++s)
    batches.push_back({{"x", uniform({32, 12}, 10 + s)}, {"y", uniform({32, 3}, 20 + s)}});
  auto cpu = make_backend("cpu");
  for (Precision precision : {Precision::kFp32, Precision::kMxu}) {
    const double tol = precision == Precision::kFp32 ? 1e-5 : 1e-2;
    Variables on_cpu = initial_variables(b.graph()), on_gpu = on_cpu;
    auto cpu_exe = (*cpu)->compile(b.graph(), {precision});
    auto gpu_exe = gpu.compile(b.graph(), {precision});
    ASSERT_TRUE(cpu_exe.ok() && gpu_exe.ok());
    auto want = (*cpu)->run(**cpu_exe, on_cpu, batches, 0);
    auto got = gpu.run(**gpu_exe, on_gpu, batches, 0);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    for (size_t s = 0; s < batches.size(); ++s) {
      const float l = (*want)[s].at("loss").f[0];
      EXPECT_NEAR((*got)[s].at("loss").f[0], l, tol * std::abs(l))
          << kPrecisions.name(precision) << " step " << s;
    }
    for (const auto& [name, value] : on_cpu) {
      for (size_t i = 0; i < value.f.size(); ++i)
        EXPECT_NEAR(on_gpu.at(name).f[i], value.f[i], tol)
            << kPrecisions.name(precision) << " " << name;
    }
  }
}

// Replicas in lockstep: cross_replica_sum adds in the cpu's ring order (bit for bit), and a
// CrossShardOptimizer step leaves every replica with the same variables, close to the cpu's.
TEST(GpuBackend, ReplicasSumInRingOrder) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  b.output("s", b.cross_replica_sum(b.infeed("x", DType::kF32, {1000})));
  ASSERT_TRUE(b.status().ok()) << b.status();
  LoopStep step;
  for (uint32_t r = 0; r < 3; ++r) {
    HostTensor x = uniform({1000}, 30 + r);
    for (float& v : x.f) v *= 1e8f * static_cast<float>(r + 1);  // large terms: order shows
    step.replicas.push_back({{"x", x}});
  }
  auto cpu = make_backend("cpu");
  auto run = [&](Backend& backend) {
    auto exe = backend.compile(b.graph(), {Precision::kFp32, 3});
    EXPECT_TRUE(exe.ok());
    Variables none;
    auto out = backend.run_loop(**exe, none, {step}, 0);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *std::move(out) : LoopResult{};
  };
  const LoopResult want = run(**cpu), got = run(gpu);
  ASSERT_EQ(got.outputs.size(), 1u);
  ASSERT_EQ(got.outputs[0].size(), 3u);
  for (uint32_t r = 0; r < 3; ++r)
    EXPECT_EQ(got.outputs[0][r].at("s").f, want.outputs[0][r].at("s").f) << "replica " << r;
}

TEST(GpuBackend, CrossShardStepKeepsReplicasEqual) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 6});
  const Value err = layers::dense(b, x, 3, layers::Activation::kTanh, 1) + -0.5f;
  const Value loss = layers::reduce_mean(err * err, {0, 1});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = cross_shard_gradients(b, loss, vars, 4, ShardReduction::kMean);
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < vars.size(); ++i) {
    b.output(str_cat("before/", b.graph().node(vars[i].id).attrs.name), vars[i]);
    b.update(vars[i], vars[i] - (*grads)[i] * 0.1f);
  }
  std::vector<LoopStep> loop(3);
  for (size_t s = 0; s < loop.size(); ++s) {
    for (uint32_t r = 0; r < 4; ++r)
      loop[s].replicas.push_back({{"x", uniform({8, 6}, static_cast<uint32_t>(40 + 4 * s + r))}});
  }
  auto cpu = make_backend("cpu");
  Variables on_cpu = initial_variables(b.graph()), on_gpu = on_cpu;
  auto cpu_exe = (*cpu)->compile(b.graph(), {Precision::kFp32, 4});
  auto gpu_exe = gpu.compile(b.graph(), {Precision::kFp32, 4});
  ASSERT_TRUE(cpu_exe.ok() && gpu_exe.ok());
  ASSERT_TRUE((*cpu)->run_loop(**cpu_exe, on_cpu, loop, 0).ok());
  auto got = gpu.run_loop(**gpu_exe, on_gpu, loop, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  for (const auto& [name, value] : got->outputs[2][0]) {
    for (uint32_t r = 1; r < 4; ++r) EXPECT_EQ(got->outputs[2][r].at(name).f, value.f) << name;
  }
  for (const auto& [name, value] : on_cpu) {
    for (size_t i = 0; i < value.f.size(); ++i)
      EXPECT_NEAR(on_gpu.at(name).f[i], value.f[i], 1e-5) << name;
  }
}

TEST(GpuBackend, BadOptionsAreNamed) {
  GPU_OR_SKIP(gpu);
  GraphBuilder b;
  b.output("y", b.infeed("x", DType::kF32, {2}) * 2.0f);
  auto exe = gpu.compile(b.graph(), {Precision::kFp32, 2, AllReduceAlgorithm::kTorus});
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(std::string(exe.status().message()).find("gpu backend: allreduce 'torus' is not"),
            std::string::npos);
  auto ok = gpu.compile(b.graph(), {});
  ASSERT_TRUE(ok.ok());
  Variables none;
  auto run = gpu.run(**ok, none, {Feeds{}}, 0);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(std::string(run.status().message()).find("no batch for infeed 'x'"), std::string::npos);
}

}  // namespace gpu_backend_test
}  // namespace tpusim::runtime
