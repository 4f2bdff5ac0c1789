#pragma once
// The op cases of the numerics harness (after ggml's test-backend-ops): one case per operation
// and representative shape, with the inputs it takes and how it is built. The same cases drive
// `tpusim opcheck` (every backend against the cpu fp32 reference, forward and backward) and the
// finite-difference tests of the autodiff.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/graph/builder.h"

namespace tpusim::runtime::opcheck {

struct InputSpec {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  float low = -1, high = 1;  // uniform range; s32 inputs draw integers in [low, high)
};

struct OpCase {
  std::string op;     // the operation ("matmul", "conv2d", "softmax", ...)
  std::string shape;  // what the case's shapes are, for reports
  std::vector<InputSpec> inputs;
  std::function<Value(GraphBuilder&, const std::vector<Value>&)> build;
  bool differentiable = true;
  // Terms each output element sums (K of a matmul, window x channels of a conv): the tolerance
  // grows with its square root.
  int64_t reduction_length = 1;
  // The op goes through a bf16 matmul on MXU-like backends (tolerance of bf16, not f32).
  bool uses_matmul = false;
  // The case computes in bf16 (a mixed_bfloat16 model's way): its output holds bf16 values, and
  // two backends may round a sum to neighbouring bf16 values.
  bool bf16 = false;
  // A bf16 case whose variables are f32 inside (batch norm's): their gradients are f32 values.
  bool f32_variables = false;
  // Every backend promises the reference's values bit for bit (copies, and sums in one fixed
  // order): the tolerance is 0.
  bool exact = false;
};

// Every case: the f32 ones, bf16_cases(), then bert_cases().
std::vector<OpCase> all_cases();
// Layers computed in bf16 (cases_bf16.cc).
std::vector<OpCase> bf16_cases();
// BERT's ops and layers, f32 and bf16 (cases_bert.cc): gather and scatter_add, gelu, embedding,
// layer normalisation with gamma and beta.
std::vector<OpCase> bert_cases();

}  // namespace tpusim::runtime::opcheck
