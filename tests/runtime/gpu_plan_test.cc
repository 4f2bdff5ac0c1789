// The gpu backend's device logic run on the host: every opcheck case goes through plan_node and
// eval_element exactly as the gpu backend launches them (one call per element), with the GEMMs
// done where cuBLAS would run from the very parameters the backend passes it (gemm_call.h),
// through the BLAS definition of a column-major GEMM. Without a GPU this checks
// every plan's index math and every kernel's order of operations against the cpu backend: bit
// for bit where no matmul is involved (the element kernels promise that), within f32 rounding
// of the accumulation order where one is.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "runtime/backend/gpu/gemm_call.h"
#include "runtime/backend/gpu/node_plan.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"
#include "runtime/models/zoo.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/blas_reference.h"

namespace tpusim::runtime::gpu {
namespace gpu_plan_test {

using testing::blas_element;

const void* data_of(const HostTensor& t) {
  return t.dtype == DType::kS32 ? static_cast<const void*>(t.i.data())
                                : static_cast<const void*>(t.f.data());
}

// What cuBLAS computes for the call gemm_call makes of `p` (the parameters Cublas::matmul
// passes), by the BLAS definition of a column-major strided batched GEMM, op N on both, with the
// plan's b as cuBLAS's A and its a as cuBLAS's B; f32 sums along k.
void emulate_gemm(const MatMulPlan& p, const HostTensor& a, const HostTensor& b, HostTensor* out) {
  auto call = gemm_call(p);
  ASSERT_TRUE(call.ok()) << call.status();
  auto input = [&](const HostTensor& t, int64_t elements) {
    EXPECT_EQ(static_cast<int64_t>(t.f.size()), elements);
    std::vector<float> v = t.f;
    if (p.bf16_inputs) {
      for (float& x : v) x = element::round_to_bf16(x);
    }
    return v;
  };
  const std::vector<float> cublas_a = input(b, call->b_elements);
  const std::vector<float> cublas_b = input(a, call->a_elements);
  ASSERT_EQ(static_cast<int64_t>(out->f.size()), call->out_elements);
  if (call->nothing_to_do) return;
  if (call->zero_fill) {
    std::fill(out->f.begin(), out->f.end(), 0.0f);
    return;
  }
  for (int64_t g = 0; g < call->batch_count; ++g) {
    for (int64_t j = 0; j < call->n; ++j) {
      for (int64_t i = 0; i < call->m; ++i) {
        const float acc = blas_element(*call, cublas_a, cublas_b, 0, g, i, j);
        const int64_t c = i + j * call->ldc + g * call->stride_c;
        ASSERT_LT(c, call->out_elements);
        out->f[static_cast<size_t>(c)] = p.round_output ? element::round_to_bf16(acc) : acc;
      }
    }
  }
}

// One replica of one step of `g`, node by node as GpuBackend::run_node does it.
Outputs emulate(const Graph& g, const Feeds& feeds, const Variables& vars, bool mxu,
                uint64_t step) {
  std::vector<HostTensor> values(static_cast<size_t>(g.size()));
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    auto plan = plan_node(g, id, mxu);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return {};
    HostTensor& out = values[static_cast<size_t>(id)];
    auto input = [&](size_t i) -> const HostTensor& {
      return values[static_cast<size_t>(n.inputs[i])];
    };
    switch (plan->work) {
      case NodeWork::kSource:
        out = n.op == Op::kConstant   ? n.attrs.value
              : n.op == Op::kVariable ? vars.at(n.attrs.name)
                                      : feeds.at(n.attrs.name);
        break;
      case NodeWork::kAlias:
      case NodeWork::kCrossReplicaSum:
        out = input(0);
        out.shape = n.shape;
        break;
      case NodeWork::kMatMul:
        out = HostTensor::zeros(n.dtype, n.shape);
        emulate_gemm(plan->matmul, input(0), input(1), &out);
        break;
      case NodeWork::kElements:
        out = HostTensor::zeros(n.dtype, n.shape);  // zero_output or not: every element is set
        std::vector<double> scratch(static_cast<size_t>(plan->scratch_bytes) / sizeof(double));
        for (const ElementLaunch& l : plan->launches) {
          ElementPlan p = l.plan;
          p.step = step;
          const void* operand[3] = {nullptr, nullptr, nullptr};
          auto* scratch_bytes = reinterpret_cast<char*>(scratch.data());
          for (size_t k = 0; k < l.operands.size(); ++k) {
            operand[k] = l.operands[k] == kScratchOperand
                             ? static_cast<const void*>(scratch_bytes + l.scratch_in)
                             : data_of(input(static_cast<size_t>(l.operands[k])));
          }
          void* dst = l.writes_scratch ? static_cast<void*>(scratch_bytes + l.scratch_out)
                      : p.int_out      ? static_cast<void*>(out.i.data())
                                       : static_cast<void*>(out.f.data());
          for (int64_t e = 0; e < p.count; ++e)
            eval_element(p, operand[0], operand[1], operand[2], dst, e);
        }
        break;
    }
  }
  Outputs outputs;
  for (const auto& o : g.outputs()) outputs[o.name] = values[static_cast<size_t>(o.node)];
  return outputs;
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
  if (a.f.size() != b.f.size() || a.i.size() != b.i.size()) return false;
  // memcmp of an empty vector's data() (null) is undefined even for 0 bytes.
  return (a.f.empty() || std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)) == 0) &&
         (a.i.empty() || std::memcmp(a.i.data(), b.i.data(), a.i.size() * sizeof(int32_t)) == 0);
}

double max_rel_error(const HostTensor& got, const HostTensor& want) {
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.f.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(want.f[i])));
    err = std::max(err, std::abs(static_cast<double>(got.f[i]) - want.f[i]));
  }
  return scale > 0 ? err / scale : err;
}

TEST(GpuPlan, EveryOpcheckCaseOnTheHostMatchesTheCpuBackend) {
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok());
  int bitwise = 0;
  for (const opcheck::OpCase& c : opcheck::all_cases()) {
    for (Precision precision : {Precision::kFp32, Precision::kMxu}) {
      auto graph = opcheck::build_case_graph(c, 1);
      ASSERT_TRUE(graph.ok()) << c.op << ": " << graph.status();
      const Feeds feeds = opcheck::make_feeds(c, 1);
      const Variables initial = initial_variables(*graph);
      Variables vars = initial;
      auto exe = (*cpu)->compile(*graph, {precision});
      ASSERT_TRUE(exe.ok());
      auto want = (*cpu)->run(**exe, vars, {feeds}, 3);
      ASSERT_TRUE(want.ok()) << want.status();
      const Outputs got = emulate(*graph, feeds, initial, precision == Precision::kMxu, 3);
      const double tol = opcheck::tolerance_for(c, {"gpu", precision}, {"cpu", precision});
      for (const auto& [name, expected] : (*want)[0]) {
        ASSERT_EQ(got.count(name), 1u) << c.op << " " << name;
        const HostTensor& actual = got.at(name);
        ASSERT_EQ(actual.shape, expected.shape) << c.op << " " << name;
        if (!c.uses_matmul) {
          EXPECT_TRUE(same_bits(actual, expected))
              << c.op << " " << c.shape << " " << kPrecisions.name(precision) << " " << name
              << " differs from the cpu's";
          ++bitwise;
        } else {
          EXPECT_LE(max_rel_error(actual, expected), tol)
              << c.op << " " << c.shape << " " << kPrecisions.name(precision) << " " << name;
        }
      }
    }
  }
  EXPECT_GT(bitwise, 60);
}

// A random mask drawn on the host by the rng kernel is the cpu's, step for step.
TEST(GpuPlan, RngUniformIsTheCpusBitForBit) {
  GraphBuilder b;
  b.output("u", b.rng_uniform({3, 50}, 1234));
  auto cpu = make_backend("cpu");
  auto exe = (*cpu)->compile(b.graph(), {});
  ASSERT_TRUE(exe.ok());
  for (uint64_t step : {0u, 1u, 99u}) {
    Variables vars;
    auto want = (*cpu)->run(**exe, vars, {Feeds{}}, step);
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(same_bits(emulate(b.graph(), {}, {}, false, step).at("u"), (*want)[0].at("u")));
  }
}

// Reductions longer than a block: the plan's partial and finishing launches on the host give
// the cpu's bits, for leading, trailing and middle axes, sums and maxima.
TEST(GpuPlan, LongReductionsSumInTheCpusBlocks) {
  struct Case {
    std::vector<int64_t> shape, axes;
    Op op;
  };
  const std::vector<Case> cases = {
      {{600, 5}, {0}, Op::kReduceSum},       {{3, 1000}, {1}, Op::kReduceSum},
      {{4, 300, 3}, {0, 1}, Op::kReduceSum}, {{7, 300, 2}, {1}, Op::kReduceSum},
      {{2, 3, 300}, {0, 2}, Op::kReduceSum}, {{2, 3, 300}, {0, 2}, Op::kReduceMax},
      {{520, 4}, {0}, Op::kReduceMax},       {{70000, 2}, {0}, Op::kReduceSum},
      {{2, 70000}, {1}, Op::kReduceSum},     {{2, 70000, 1}, {1}, Op::kReduceSum},
      {{300, 300}, {0, 1}, Op::kReduceSum}};
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok());
  for (const Case& c : cases) {
    GraphBuilder b;
    const Value x = b.infeed("x", DType::kF32, Shape(c.shape));
    b.output("y", b.reduce(c.op, x, c.axes));
    opcheck::OpCase input;
    input.inputs.push_back({"x", DType::kF32, Shape(c.shape), -1.0f, 1.0f});
    const Feeds feeds = opcheck::make_feeds(input, 5);
    auto exe = (*cpu)->compile(b.graph(), {});
    ASSERT_TRUE(exe.ok());
    Variables vars;
    auto want = (*cpu)->run(**exe, vars, {feeds}, 0);
    ASSERT_TRUE(want.ok()) << want.status();
    auto plan = plan_node(b.graph(), b.graph().size() - 1, false);
    ASSERT_TRUE(plan.ok());
    // The blocks, a level above them past 256 blocks, then the last level's sums.
    const int64_t terms =
        Shape(c.shape).elements() / plan->launches[0].plan.count * plan->launches[0].plan.blocks;
    EXPECT_EQ(plan->launches.size(), terms > 65536 ? 3u : 2u) << Shape(c.shape).str();
    EXPECT_TRUE(same_bits(emulate(b.graph(), feeds, {}, false, 0).at("y"), (*want)[0].at("y")))
        << Shape(c.shape).str();
  }
}

// The order itself, where a sum term by term and one by the tree differ. Two levels: 2^60,
// zeros, then a block of 256 ones, then -2^60. Term by term in double the ones vanish against
// 2^60 (its ulp is 256) and the sum is 0; in blocks of 256 the ones sum to 256 first, which
// 2^60 + 256 keeps, and the sum is 256. Three levels: 2^60, then 256 blocks holding a 1 each
// (the second group of the level above the blocks), then -2^60: added block after block the
// ones vanish again (0); the tree sums them to 256 in their group first (256). Columns, rows
// and a middle axis.
TEST(GpuPlan, ReductionBlocksArePinned) {
  const float big = std::ldexp(1.0f, 60);
  std::vector<float> two_levels(768, 0.0f), three_levels(513 * 256, 0.0f);
  two_levels[0] = big;
  for (size_t k = 256; k < 512; ++k) two_levels[k] = 1.0f;
  two_levels[512] = -big;
  three_levels[0] = big;
  for (size_t block = 256; block < 512; ++block) three_levels[block * 256] = 1.0f;
  three_levels[512 * 256] = -big;
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok());
  for (const std::vector<float>& terms : {two_levels, three_levels}) {
    const auto n = static_cast<int64_t>(terms.size());
    for (const auto& [shape, axis] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{n, 1}, 0}, {{1, n}, 1}, {{1, n, 1}, 1}}) {
      GraphBuilder b;
      b.output("y", b.reduce(Op::kReduceSum, b.infeed("x", DType::kF32, Shape(shape)), {axis}));
      Feeds feeds;
      feeds["x"] = HostTensor::zeros(DType::kF32, Shape(shape));
      feeds["x"].f = terms;
      auto exe = (*cpu)->compile(b.graph(), {});
      ASSERT_TRUE(exe.ok());
      Variables vars;
      auto want = (*cpu)->run(**exe, vars, {feeds}, 0);
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ((*want)[0].at("y").f.at(0), 256.0f) << Shape(shape).str();
      EXPECT_EQ(emulate(b.graph(), feeds, {}, false, 0).at("y").f.at(0), 256.0f)
          << Shape(shape).str();
    }
  }
}

// A transpose read only by matmuls moves no data (the weight and input gradients read the
// forward values transposed), except as the lhs of a product under 4096 outputs; either way the
// products are the cpu's.
TEST(GpuPlan, TransposesReadOnlyByMatmulsAreFolded) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, Shape({6, 64}));
  const Value w = b.infeed("w", DType::kF32, Shape({64, 64}));
  const Value wt = b.transpose(w, {1, 0});
  const Value xt = b.transpose(x, {1, 0});
  const Value y = b.matmul(x, wt);  // [6, 64]: x times w read transposed
  const Value g = b.matmul(xt, y);  // [64, 64]: x read transposed
  const Value s = b.infeed("z", DType::kF32, Shape({6, 3}));
  const Value st = b.transpose(s, {1, 0});
  b.output("y", y);
  b.output("g", g);
  b.output("small", b.matmul(st, y));  // [3, 64]: too few outputs, st is made
  b.output("xt", b.transpose(s, {1, 0}));
  const Graph& graph = b.graph();
  EXPECT_TRUE(transpose_folds_into_matmuls(graph, wt.id));
  EXPECT_TRUE(transpose_folds_into_matmuls(graph, xt.id));
  EXPECT_FALSE(transpose_folds_into_matmuls(graph, st.id));
  EXPECT_FALSE(transpose_folds_into_matmuls(graph, graph.size() - 1));  // an output
  auto plan = plan_node(graph, y.id, false);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->matmul.b_transposed);
  EXPECT_FALSE(plan->matmul.a_transposed);
  Feeds feeds;
  const char* names[] = {"x", "w", "z"};
  for (size_t k = 0; k < 3; ++k) {
    HostTensor t = HostTensor::zeros(DType::kF32, graph.node(graph.infeeds()[k]).shape);
    for (size_t i = 0; i < t.f.size(); ++i) t.f[i] = static_cast<float>((i * 7 + k) % 11) - 5;
    feeds[names[k]] = t;
  }
  auto cpu = make_backend("cpu");
  auto exe = (*cpu)->compile(graph, {Precision::kFp32});
  ASSERT_TRUE(exe.ok());
  Variables vars;
  auto want = (*cpu)->run(**exe, vars, {feeds}, 0);
  ASSERT_TRUE(want.ok()) << want.status();
  const Outputs got = emulate(graph, feeds, {}, false, 0);
  for (const char* name : {"y", "g", "small", "xt"})
    EXPECT_TRUE(same_bits(got.at(name), (*want)[0].at(name))) << name;  // small integers: exact
}

// A transpose that swaps two runs of trailing axes is a tiled kTranspose of [batches, rows,
// cols]; one that keeps the last axis stays a gather (its rows are already contiguous).
TEST(GpuPlan, TransposesThatSwapTrailingAxesAreTiled) {
  struct Case {
    std::vector<int64_t> perm;
    ElementKind kind;
    int64_t rows, cols;
  };
  for (const Case& c : std::vector<Case>{{{0, 2, 3, 1}, ElementKind::kTranspose, 3, 20},
                                         {{2, 3, 0, 1}, ElementKind::kTranspose, 6, 20},
                                         {{0, 1, 3, 2}, ElementKind::kTranspose, 4, 5},
                                         {{1, 0, 2, 3}, ElementKind::kGather, 0, 0},
                                         {{3, 1, 2, 0}, ElementKind::kGather, 0, 0}}) {
    GraphBuilder b;
    b.output("y", b.transpose(b.infeed("x", DType::kF32, Shape({2, 3, 4, 5})), c.perm));
    auto plan = plan_node(b.graph(), b.graph().size() - 1, false);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->launches.size(), 1u);
    const ElementPlan& p = plan->launches[0].plan;
    EXPECT_EQ(p.kind, c.kind) << c.perm[0] << c.perm[1] << c.perm[2] << c.perm[3];
    if (c.kind == ElementKind::kTranspose) {
      EXPECT_EQ(p.len, c.rows);
      EXPECT_EQ(p.inner, c.cols);
    }
  }
}

// The full-size models' training steps (ResNet-50 at 224 x 224, BERT-Large at 128 tokens) plan
// on the gpu backend node for node: every op has a kernel and every shape fits its indexing.
TEST(GpuPlan, FullSizeModelsPlanEveryNode) {
  for (const char* model : {"resnet50", "bert_large"}) {
    GraphBuilder b;
    ASSERT_TRUE(
        models::build_training_step(b, model, 8, 0.01f, 1, models::DTypePolicy::kFloat32, 8).ok())
        << model;
    int folded = 0, launches = 0;
    for (int id = 0; id < b.graph().size(); ++id) {
      auto plan = plan_node(b.graph(), id, true);
      ASSERT_TRUE(plan.ok()) << model << ": " << plan.status();
      folded += transpose_folds_into_matmuls(b.graph(), id) ? 1 : 0;
      launches += static_cast<int>(plan->launches.size());
    }
    EXPECT_GT(b.graph().size(), 1000) << model;
    EXPECT_GT(folded, 0) << model;
    EXPECT_GT(launches, b.graph().size() / 2) << model;
  }
}

TEST(GpuPlan, TooManyDimensionsAreRefusedNamingTheNode) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, Shape(std::vector<int64_t>(9, 1)));
  b.output("y", x * 2.0f);
  auto plan = plan_node(b.graph(), b.graph().size() - 1, false);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(plan.status().message()).find("node %"), std::string::npos)
      << plan.status();
  EXPECT_NE(std::string(plan.status().message()).find("at most 8 dimensions"), std::string::npos)
      << plan.status();
}

}  // namespace gpu_plan_test
}  // namespace tpusim::runtime::gpu
