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
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime::gpu {
namespace {

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
  auto at = [](const std::vector<float>& v, int64_t index) {
    EXPECT_GE(index, 0);
    EXPECT_LT(index, static_cast<int64_t>(v.size()));
    return v[static_cast<size_t>(index)];
  };
  for (int64_t g = 0; g < call->batch_count; ++g) {
    for (int64_t j = 0; j < call->n; ++j) {
      for (int64_t i = 0; i < call->m; ++i) {
        float acc = 0;
        for (int64_t l = 0; l < call->k; ++l) {
          acc += at(cublas_a, i + l * call->lda + g * call->stride_a) *
                 at(cublas_b, l + j * call->ldb + g * call->stride_b);
        }
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
        for (const ElementLaunch& l : plan->launches) {
          ElementPlan p = l.plan;
          p.step = step;
          const void* operand[3] = {nullptr, nullptr, nullptr};
          for (size_t k = 0; k < l.operands.size(); ++k)
            operand[k] = data_of(input(static_cast<size_t>(l.operands[k])));
          void* dst =
              p.int_out ? static_cast<void*>(out.i.data()) : static_cast<void*>(out.f.data());
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

}  // namespace
}  // namespace tpusim::runtime::gpu
