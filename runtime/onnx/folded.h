#pragma once
// Tensors the importer knows at import time (initializers that are not weights, Constant nodes,
// Shape's results and what is computed from them only): shape arithmetic is folded on the host,
// as ONNX Runtime's and XLA's constant folding would, and never reaches the device.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <onnx/onnx_pb.h>

#include "runtime/graph/tensor.h"

namespace tpusim::runtime::onnx_import {

// The most elements a tensor folded at import time may have (1 GiB of doubles): a file that asks
// for more is refused rather than allowed to exhaust the host.
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 27;

// The elements of a tensor of `dims`, or -1 when a dimension is negative or its dimensions but
// the zeros multiply past kMaxFoldedElements (computed without overflowing; a tensor with a zero
// dimension is empty, but one of [0, 2^40, 2^40] is still refused: whatever multiplies its shape
// out later would overflow).
int64_t foldable_elements(const std::vector<int64_t>& dims);

struct Folded {
  std::vector<int64_t> dims;
  std::vector<double> data;  // row-major; integers and booleans held exactly
  bool integer = false;      // an integer or boolean ONNX type (s32 on the device)

  int64_t elements() const;
  // The values as integers (shape operands); InvalidArgument names `what` for a fractional one.
  absl::StatusOr<std::vector<int64_t>> ints(const std::string& what) const;
  // The tensor the device holds: f32, or s32 for integers (InvalidArgument when one overflows).
  absl::StatusOr<HostTensor> host_tensor() const;
};

// An initializer or Constant's tensor (raw_data or the typed fields).
absl::StatusOr<Folded> fold_tensor(const onnx::TensorProto& t);
Folded fold_scalar(double value, bool integer);
Folded fold_vector(const std::vector<int64_t>& values);

// Numpy broadcasting of two shapes; InvalidArgument names both when they do not broadcast.
absl::StatusOr<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);
// f(a, b) elementwise with numpy broadcasting.
absl::StatusOr<Folded> fold_binary(const Folded& a, const Folded& b, double (*f)(double, double),
                                   bool integer_result);
// `a` with its dimensions permuted (output dim i is input dim perm[i]). A `perm` that is no
// permutation of a's dimensions (an NCHW -> NHWC of a tensor of another rank, a file's weights
// of a rank their op does not take) leaves `a` as it is, for the caller's shape check to refuse.
Folded fold_transpose(const Folded& a, const std::vector<int64_t>& perm);
// Rows of `a` along `axis` at `indices` (negative indices count from the end), ONNX's Gather.
absl::StatusOr<Folded> fold_gather(const Folded& a, const Folded& indices, int64_t axis);
// [begin, end) along each dimension with step 1.
Folded fold_slice(const Folded& a, const std::vector<int64_t>& begin,
                  const std::vector<int64_t>& end);
Folded fold_concat(const std::vector<const Folded*>& parts, int64_t axis);

}  // namespace tpusim::runtime::onnx_import
