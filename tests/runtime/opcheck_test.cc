// The numerics harness in ctest: every case on cpu (fp32, the reference itself) and cpu:mxu.
#include <limits>

#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime::opcheck {
namespace opcheck_test {

TEST(OpCheck, EveryCasePassesOnCpuAndCpuMxu) {
  int ops_with_matmul = 0;
  for (const OpCase& c : all_cases()) {
    for (const char* spec : {"cpu", "cpu:mxu"}) {
      auto results = run_case(c, *parse_backend_spec(spec));
      ASSERT_TRUE(results.ok()) << c.op << " " << c.shape << ": " << results.status();
      for (const CaseResult& r : *results) {
        EXPECT_TRUE(r.passed) << r.op << " " << r.shape << " " << r.backend << " " << r.tensor
                              << ": rel " << r.max_rel_error << " > " << r.tolerance << " worst "
                              << r.worst;
        if (r.backend == reference_backend().name) {  // the reference against itself: exact
          EXPECT_EQ(r.max_abs_error, 0) << r.op << " " << r.tensor;
        }
      }
    }
    ops_with_matmul += c.uses_matmul ? 1 : 0;
  }
  EXPECT_GE(ops_with_matmul, 4);
}

// The mxu policy rounds matmul inputs to bf16: errors appear, about bf16's epsilon, and ops
// without a matmul stay exact.
TEST(OpCheck, MxuPrecisionShowsBf16ErrorsOnlyWhereMatmulsAre) {
  for (const OpCase& c : all_cases()) {
    if (c.op != "matmul" && c.op != "add") continue;
    auto results = run_case(c, *parse_backend_spec("cpu:mxu"));
    ASSERT_TRUE(results.ok());
    for (const CaseResult& r : *results) {
      if (c.op == "matmul") {
        EXPECT_GT(r.max_rel_error, 1e-4) << r.tensor;
        EXPECT_LT(r.max_rel_error, 1e-2) << r.tensor;
        EXPECT_GT(r.ulp, 1000);
      } else {
        EXPECT_EQ(r.max_rel_error, 0) << r.tensor;
      }
    }
  }
}

// A NaN or infinity where the reference has a finite value fails wherever it is (a NaN after
// the first element used to go unnoticed); matching NaNs and infinities agree.
TEST(OpCheck, TensorErrorCountsNanAndInfinityAnywhere) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  TensorError t = tensor_error({1, 2.5f, nan}, {1, 2, 3});
  EXPECT_EQ(t.max_abs, std::numeric_limits<double>::infinity());
  EXPECT_EQ(t.worst, 2);
  t = tensor_error({1, inf, 3}, {1, 2, 3});
  EXPECT_EQ(t.max_abs, std::numeric_limits<double>::infinity());
  EXPECT_EQ(t.worst, 1);
  t = tensor_error({nan, inf, 3.5f}, {nan, inf, 3});
  EXPECT_EQ(t.max_abs, 0.5);
  EXPECT_EQ(t.worst, 2);
  EXPECT_EQ(tensor_error({}, {}).worst, -1);
}

TEST(OpCheck, BackendSpecs) {
  EXPECT_EQ(parse_backend_spec("cpu:mxu")->label(), "cpu:mxu");
  EXPECT_EQ(parse_backend_spec("cpu")->precision, Precision::kFp32);
  EXPECT_FALSE(parse_backend_spec("cpu:fp8").ok());
  EXPECT_FALSE(parse_backend_spec(":mxu").ok());
  auto missing = run_case(all_cases()[0], *parse_backend_spec("quantum"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("no backend named 'quantum'"),
            std::string::npos);
}

}  // namespace opcheck_test
}  // namespace tpusim::runtime::opcheck
