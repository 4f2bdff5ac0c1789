// The gpu backend's device logic run on the host: every opcheck case goes through plan_node and
// eval_element exactly as the gpu backend launches them (one call per element), with the GEMMs
// done from their MatMulPlan in plain loops where cuBLAS would run. Without a GPU this checks
// every plan's index math and every kernel's order of operations against the cpu backend: bit
// for bit where no matmul is involved (the element kernels promise that), within f32 rounding
// of the accumulation order where one is.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/gpu/node_plan.h"
#include "runtime/graph/initializers.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime::gpu {
namespace {

const void* data_of(const HostTensor& t) {
  return t.dtype == DType::kS32 ? static_cast<const void*>(t.i.data())
                                : static_cast<const void*>(t.f.data());
}

// What cuBLAS is asked for: row-major GEMMs from the plan, summed in f32 along k.
void emulate_gemm(const MatMulPlan& p, const HostTensor& a, const HostTensor& b, HostTensor* out) {
  auto input = [&](const HostTensor& t) {
    std::vector<float> v = t.f;
    if (p.bf16_inputs) {
      for (float& x : v) x = element::round_to_bf16(x);
    }
    return v;
  };
  const std::vector<float> va = input(a), vb = input(b);
  const int64_t rows = p.shared_rhs ? p.batches * p.m : p.m;
  const int64_t batches = p.shared_rhs ? 1 : p.batches;
  for (int64_t g = 0; g < batches; ++g) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < p.k; ++k)
          acc += va[static_cast<size_t>(g * rows * p.k + i * p.k + k)] *
                 vb[static_cast<size_t>(g * p.k * p.n + k * p.n + j)];
        float& o = out->f[static_cast<size_t>(g * rows * p.n + i * p.n + j)];
        o = p.round_output ? element::round_to_bf16(acc) : acc;
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
  return std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)) == 0 &&
         std::memcmp(a.i.data(), b.i.data(), a.i.size() * sizeof(int32_t)) == 0;
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
