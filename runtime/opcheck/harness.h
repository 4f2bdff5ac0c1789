#pragma once
// Runs op cases on backends and compares them with the cpu fp32 reference, forward (the op's
// output) and backward (gradients of sum(cotangent x output) with respect to every floating
// input and variable). Tolerances come from the precision the backend computes in: bf16's
// epsilon (2^-8) for ops that go through an MXU-style matmul, f32's (2^-23) otherwise, growing
// with the square root of the op's reduction length; 0 for the cases that promise bit-for-bit
// agreement (OpCase::exact).

#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/opcheck/cases.h"

namespace tpusim::runtime::opcheck {

// "cpu" (fp32), "cpu:mxu", ...: a backend name and an optional precision.
struct BackendSpec {
  std::string name;
  Precision precision = Precision::kFp32;
  std::string slice = "v3-8";  // the slice config file or built-in name tpusim simulates
  std::string label() const {
    return precision == Precision::kFp32 ? name
                                         : name + ":" + std::string(kPrecisions.name(precision));
  }
};
absl::StatusOr<BackendSpec> parse_backend_spec(const std::string& text);

// How far `got` is from `ref`, element by element: the largest |got - ref| and where (-1 when
// empty), and the largest distance in ulps. Equal values (infinities included) and NaN against
// NaN count as 0; a NaN or infinity against anything else as an infinite difference, so it
// always fails, wherever it is.
struct TensorError {
  double max_abs = 0;
  int64_t worst = -1;
  int64_t ulp = 0;
};
TensorError tensor_error(const std::vector<float>& got, const std::vector<float>& ref);

struct CaseResult {
  std::string op;
  std::string backend;
  std::string mode;    // "forward" or "backward"
  std::string shape;   // the case's shapes
  std::string tensor;  // "output" or "grad(<input or variable>)"
  double max_abs_error = 0;
  double max_rel_error = 0;  // max |got - ref| / max |ref|
  int64_t ulp = 0;           // largest distance in f32 units in the last place
  double tolerance = 0;      // bound on max_rel_error
  bool passed = false;
  std::string worst;  // the worst element: index, value and reference
};

// Graph inputs: one seeded batch per infeed of the case.
Feeds make_feeds(const OpCase& c, uint32_t seed);
// The cotangent the backward check multiplies the output by: uniform [-1, 1), seeded.
HostTensor make_cotangent(const Shape& shape, uint32_t seed);
// The case's graph: its inputs as infeeds, "output", and (when differentiable) one
// "grad(<name>)" output per floating input and variable.
// With `with_loss`, also "loss" = sum(cotangent x output), for finite differences.
absl::StatusOr<Graph> build_case_graph(const OpCase& c, uint32_t seed, bool with_loss = false);

double tolerance_for(const OpCase& c, const BackendSpec& backend,
                     const BackendSpec& reference = BackendSpec{"cpu", Precision::kFp32});

// Runs `c` on `backend` and on `reference` (cpu fp32 unless given); one result per output
// tensor. Against a reference of the same precision (tpusim vs cpu:mxu) only the order of
// accumulation differs, so the tolerance is f32's.
absl::StatusOr<std::vector<CaseResult>> run_case(const OpCase& c, const BackendSpec& backend,
                                                 uint32_t seed = 1,
                                                 const BackendSpec& reference = BackendSpec{
                                                     "cpu", Precision::kFp32});

}  // namespace tpusim::runtime::opcheck
