// The cuBLAS calls the gpu backend makes (gemm_call.h), checked on the host: each layout of
// batches, replicas and shared operands, and the split of long sums, run through the BLAS
// definition of a column-major GEMM against the products they stand for.
#include "runtime/backend/gpu/gemm_call.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "runtime/backend/gpu/node_plan.h"
#include "tests/runtime/blas_reference.h"

namespace tpusim::runtime::gpu {
namespace gemm_call_test {

using testing::blas_element;

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

}  // namespace gemm_call_test
}  // namespace tpusim::runtime::gpu
