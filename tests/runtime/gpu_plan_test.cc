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

namespace tpusim::runtime::gpu {
namespace gpu_plan_test {

const void* data_of(const HostTensor& t) {
  return t.dtype == DType::kS32 ? static_cast<const void*>(t.i.data())
                                : static_cast<const void*>(t.f.data());
}

// Element (i, j) of batch g of call c of `call` by the BLAS definition of a column-major
// strided batched GEMM (batch g's operands where GemmCall::a_offset and b_offset put them): the
// sum over l of op(A)[i, l] op(B)[l, j] in f32, l ascending.
float blas_element(const GemmCall& call, const std::vector<float>& a, const std::vector<float>& b,
                   int64_t c, int64_t g, int64_t i, int64_t j) {
  float acc = 0;
  for (int64_t l = 0; l < call.k; ++l) {
    const int64_t ai = call.transa ? l + i * call.lda : i + l * call.lda;
    const int64_t bi = call.transb ? j + l * call.ldb : l + j * call.ldb;
    acc += a.at(static_cast<size_t>(c * call.call_stride_a + call.a_offset(g) + ai)) *
           b.at(static_cast<size_t>(c * call.call_stride_b + call.b_offset(g) + bi));
  }
  return acc;
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
    for (const char* precision : {"fp32", "mxu"}) {
      auto graph = opcheck::build_case_graph(c, 1);
      ASSERT_TRUE(graph.ok()) << c.op << ": " << graph.status();
      const Feeds feeds = opcheck::make_feeds(c, 1);
      const Variables initial = initial_variables(*graph);
      Variables vars = initial;
      auto exe = (*cpu)->compile(*graph, {precision});
      ASSERT_TRUE(exe.ok());
      auto want = (*cpu)->run(**exe, vars, {feeds}, 3);
      ASSERT_TRUE(want.ok()) << want.status();
      const Outputs got = emulate(*graph, feeds, initial, std::string(precision) == "mxu", 3);
      const double tol = opcheck::tolerance_for(c, {"gpu", precision}, {"cpu", precision});
      for (const auto& [name, expected] : (*want)[0]) {
        ASSERT_EQ(got.count(name), 1u) << c.op << " " << name;
        const HostTensor& actual = got.at(name);
        ASSERT_EQ(actual.shape, expected.shape) << c.op << " " << name;
        if (!c.uses_matmul) {
          EXPECT_TRUE(same_bits(actual, expected)) << c.op << " " << c.shape << " " << precision
                                                   << " " << name << " differs from the cpu's";
          ++bitwise;
        } else {
          EXPECT_LE(max_rel_error(actual, expected), tol)
              << c.op << " " << c.shape << " " << precision << " " << name;
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

TEST(GemmCall, SharedRhsIsOneGemmOverEveryBatchRow) {
  // [2, 3, 4] x [4, 5]: out^T [5, 6] = b^T [5, 4] x a^T [4, 6].
  MatMulPlan p;
  p.m = 3, p.k = 4, p.n = 5, p.batches = 2, p.shared_rhs = true;
  auto call = gemm_call(p);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->batch_count, 1);
  EXPECT_EQ(call->m, 5);
  EXPECT_EQ(call->n, 6);
  EXPECT_EQ(call->k, 4);
  EXPECT_EQ(call->lda, 5);
  EXPECT_EQ(call->ldb, 4);
  EXPECT_EQ(call->ldc, 5);
  EXPECT_EQ(call->a_elements, 24);
  EXPECT_EQ(call->b_elements, 20);
  EXPECT_EQ(call->out_elements, 30);
}

TEST(GemmCall, BatchedOperandsStepByWholeMatrices) {
  // [2, 3, 4] x [2, 4, 5]: two GEMMs, each operand's batch stride one of its matrices.
  MatMulPlan p;
  p.m = 3, p.k = 4, p.n = 5, p.batches = 2;
  auto call = gemm_call(p);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->batch_count, 2);
  EXPECT_EQ(call->m, 5);
  EXPECT_EQ(call->n, 3);
  EXPECT_EQ(call->stride_a, 20);  // cuBLAS's A is the plan's b: K x N
  EXPECT_EQ(call->stride_b, 12);  // the plan's a: M x K
  EXPECT_EQ(call->stride_c, 15);
  EXPECT_EQ(call->out_elements, 30);
}

TEST(GemmCall, EmptyShapesAndOversizeOnes) {
  MatMulPlan empty_sum;  // k == 0: zeros, which cuBLAS with beta 0 would not write
  empty_sum.m = 3, empty_sum.k = 0, empty_sum.n = 5;
  auto zero = gemm_call(empty_sum);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->zero_fill);
  EXPECT_EQ(zero->out_elements, 15);
  MatMulPlan no_rows;
  no_rows.m = 0, no_rows.k = 4, no_rows.n = 5;
  auto none = gemm_call(no_rows);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->nothing_to_do);
  MatMulPlan huge;  // 2^31 rows once the batches share the rhs
  huge.m = 1 << 16, huge.k = 8, huge.n = 8, huge.batches = 1 << 15, huge.shared_rhs = true;
  auto refused = gemm_call(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(refused.status().message(),
            "GEMM [2147483648, 8] x [8, 8] x 1 batches exceeds cuBLAS's 32-bit sizes");
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

// Every replica layout gemm_call makes (one taller GEMM, replicas as batches, batches over
// replicas, a call a replica), run through the BLAS definition, gives each replica's own
// product.
TEST(GemmCall, ReplicaLayoutsGiveEveryReplicasProduct) {
  constexpr uint32_t kReplicas = 3;
  struct Form {
    bool shared_rhs, a_transposed, b_transposed;
    int64_t batches;
  };
  for (const Form form :
       {Form{true, false, false, 2}, Form{false, false, false, 2}, Form{true, true, false, 1},
        Form{true, false, true, 1}, Form{true, true, true, 1}}) {
    for (const bool a_shared : {true, false}) {
      for (const bool b_shared : {true, false}) {
        MatMulPlan p;
        p.m = 3, p.k = 4, p.n = 5, p.batches = form.batches, p.shared_rhs = form.shared_rhs;
        p.a_transposed = form.a_transposed, p.b_transposed = form.b_transposed;
        const ReplicaLayout layout{kReplicas, a_shared, b_shared};
        const int64_t a_one = p.batches * p.m * p.k;
        const int64_t b_one = (p.shared_rhs ? 1 : p.batches) * p.k * p.n;
        const int64_t out_one = p.batches * p.m * p.n;
        std::vector<float> a(static_cast<size_t>(a_one * (a_shared ? 1 : kReplicas)));
        std::vector<float> b(static_cast<size_t>(b_one * (b_shared ? 1 : kReplicas)));
        // Small integers whose period divides no replica's size, so each replica's copy differs.
        for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i * 7919 % 11) - 5.0f;
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i * 104729 % 13) - 6.0f;
        auto call = gemm_call(p, layout);
        ASSERT_TRUE(call.ok()) << call.status();
        const size_t copies = layout.out_shared() ? 1 : kReplicas;
        ASSERT_EQ(call->out_elements, out_one * static_cast<int64_t>(copies));
        std::vector<float> out(static_cast<size_t>(call->out_elements), NAN);
        for (int c = 0; c < call->calls; ++c) {
          for (int64_t g = 0; g < call->batch_count; ++g) {
            for (int64_t j = 0; j < call->n; ++j) {
              for (int64_t i = 0; i < call->m; ++i) {
                out.at(static_cast<size_t>(c * call->call_stride_c + i + j * call->ldc +
                                           g * call->stride_c)) =
                    blas_element(*call, b, a, c, g, i, j);  // cuBLAS's A is the plan's b
              }
            }
          }
        }
        // The plan's a is [batches, M, K] (stored [K, M] when transposed), b [K, N] ([N, K]).
        auto a_at = [&](size_t r, int64_t g, int64_t i, int64_t l) {
          const int64_t at = p.a_transposed ? l * p.m + i : (g * p.m + i) * p.k + l;
          return a[static_cast<size_t>((a_shared ? 0 : r * a_one) + at)];
        };
        auto b_at = [&](size_t r, int64_t g, int64_t l, int64_t j) {
          const int64_t at =
              (p.shared_rhs ? 0 : g * p.k * p.n) + (p.b_transposed ? j * p.k + l : l * p.n + j);
          return b[static_cast<size_t>((b_shared ? 0 : r * b_one) + at)];
        };
        for (size_t r = 0; r < copies; ++r) {
          for (int64_t g = 0; g < p.batches; ++g) {
            for (int64_t i = 0; i < p.m; ++i) {
              for (int64_t j = 0; j < p.n; ++j) {
                float want = 0;
                for (int64_t l = 0; l < p.k; ++l) want += a_at(r, g, i, l) * b_at(r, g, l, j);
                EXPECT_EQ(out[static_cast<size_t>(r * out_one + (g * p.m + i) * p.n + j)], want)
                    << "shared_rhs " << p.shared_rhs << " transposed " << p.a_transposed
                    << p.b_transposed << " a_shared " << a_shared << " b_shared " << b_shared
                    << " replica " << r;
              }
            }
          }
        }
      }
    }
  }
}

// A product of few outputs and a long K is split along K into chunks that run as one batched
// call, their partial sums added in chunk order: with integer terms (every sum exact) each
// split product equals the unsplit one, over replicas, shared operands and transposes.
TEST(GemmCall, SplitSumsAddEveryChunkInOrder) {
  constexpr int kMultiprocessors = 132;  // an H100's
  struct Form {
    bool a_transposed, b_transposed;
    ReplicaLayout layout;
  };
  for (const Form form :
       {Form{false, false, {3, false, false}}, Form{false, false, {3, true, false}},
        Form{false, false, {3, false, true}}, Form{false, false, {}}, Form{true, false, {}},
        Form{false, true, {}}, Form{true, true, {}}}) {
    MatMulPlan p;
    p.m = 3, p.k = 4096, p.n = 5, p.a_transposed = form.a_transposed;
    p.b_transposed = form.b_transposed;
    const ReplicaLayout& layout = form.layout;
    auto whole = gemm_call(p, layout);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const GemmCall split = split_long_sums(*whole, kMultiprocessors);
    ASSERT_GT(split.k_split, 1) << "the product was not split";
    EXPECT_EQ(split.k * split.k_split, p.k);
    EXPECT_GE(split.k, kMinChunkTerms);
    // Small integers whose period divides no replica's size, so each replica's operands differ.
    std::vector<float> a(static_cast<size_t>(whole->a_elements));
    std::vector<float> b(static_cast<size_t>(whole->b_elements));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i * 7919 % 11) - 5.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i * 104729 % 13) - 6.0f;
    // The products, as cuBLAS computes them (its A is the plan's b), of every call and batch.
    auto products = [&](const GemmCall& call) {
      std::vector<float> out(
          static_cast<size_t>(
              call.calls * std::max<int64_t>(call.call_stride_c, call.batch_count * call.stride_c)),
          NAN);
      if (call.calls == 1 && call.batch_count == 1)
        out.resize(static_cast<size_t>(call.m * call.n));
      for (int c = 0; c < call.calls; ++c)
        for (int64_t g = 0; g < call.batch_count; ++g)
          for (int64_t j = 0; j < call.n; ++j)
            for (int64_t i = 0; i < call.m; ++i)
              out.at(static_cast<size_t>(c * call.call_stride_c + g * call.stride_c + i +
                                         j * call.ldc)) = blas_element(call, b, a, c, g, i, j);
      return out;
    };
    const std::vector<float> want = products(*whole);
    const std::vector<float> partials = products(split);
    const int64_t count = int64_t{split.m} * split.n;
    EXPECT_EQ(split.split_groups, whole->batch_count);
    ASSERT_EQ(split.split_groups * count, whole->out_elements);
    ASSERT_EQ(static_cast<int64_t>(want.size()), whole->out_elements);
    for (int64_t g = 0; g < split.split_groups; ++g) {
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0;  // launch_sum_partials' order
        for (int64_t c = 0; c < split.k_split; ++c)
          sum += partials.at(static_cast<size_t>((g * split.k_split + c) * count + i));
        EXPECT_EQ(sum, want[static_cast<size_t>(g * count + i)])
            << "transposed " << p.a_transposed << p.b_transposed << " replicas " << layout.replicas
            << " shared " << layout.a_shared << layout.b_shared;
      }
    }
  }
}

// Products whose output spans the GPU, whose K has no divisor giving chunks of kMinChunkTerms,
// or whose call has both batches and calls, are left whole.
TEST(GemmCall, SplitLeavesWholeWhatItCannotHelp) {
  auto plan = [](int64_t m, int64_t k, int64_t n) {
    MatMulPlan p;
    p.m = m, p.k = k, p.n = n;
    return p;
  };
  auto chunks = [](const MatMulPlan& p, ReplicaLayout layout = {}) {
    auto call = gemm_call(p, layout);
    EXPECT_TRUE(call.ok()) << call.status();
    return split_long_sums(*call, 132).k_split;
  };
  EXPECT_EQ(chunks(plan(2048, 65536, 2048)), 1);  // 256 output tiles
  EXPECT_EQ(chunks(plan(8, 65521, 8)), 1);        // a prime K
  EXPECT_EQ(chunks(plan(8, 2000, 8)), 1);         // chunks would be under 1024 terms
  EXPECT_EQ(chunks(plan(8, 2048, 8)), 2);
  EXPECT_EQ(chunks(plan(8, 1 << 20, 8)), kMaxChunks);
  MatMulPlan batched = plan(8, 4096, 8);
  batched.batches = 2;  // batches and replicas with a shared rhs: one call a replica
  EXPECT_EQ(chunks(batched, {3, false, true}), 1);
  EXPECT_EQ(chunks(plan(25, 100352, 32), {8, false, false}), 32);  // mnist_cnn's conv1 gradient
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
  auto exe = (*cpu)->compile(graph, {"fp32"});
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
