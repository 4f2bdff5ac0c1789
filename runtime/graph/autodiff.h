#pragma once
// Reverse-mode automatic differentiation over the graph IR: adds to the builder's graph the
// nodes that compute d(loss)/d(x) for each x in `wrt`, by walking the graph backwards from the
// loss and applying each primitive's vector-Jacobian product. Values the loss does not depend
// on get zero gradients. Ties in max, min and reduce_max split the gradient equally among the
// tied elements (as JAX does).

#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/builder.h"

namespace tpusim::runtime {

// `loss` must be a floating scalar (rank 0). Returns one gradient per element of `wrt`, shaped
// like it.
absl::StatusOr<std::vector<Value>> gradients(GraphBuilder& b, Value loss,
                                             const std::vector<Value>& wrt);

// The same with an explicit cotangent of `output`'s shape: the vector-Jacobian product
// sum(cotangent * output) differentiated with respect to `wrt`.
absl::StatusOr<std::vector<Value>> vjp(GraphBuilder& b, Value output, Value cotangent,
                                       const std::vector<Value>& wrt);

}  // namespace tpusim::runtime
