#pragma once
// CrossShardOptimizer's gradients (tf.compat.v1.tpu.CrossShardOptimizer;
// docs/references.md, "TPUEstimator semantics users rely on"): each replica differentiates its own
// loss and the gradients are summed over the replicas with cross_replica_sum, so every replica
// applies the same update. With reduction MEAN the loss is first scaled by 1/num_shards, so the
// summed gradient is the gradient of the mean over all replicas' examples; with SUM it is not
// scaled.

#include <cstdint>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/builder.h"

namespace tpusim::runtime {

enum class ShardReduction { kMean, kSum };

absl::StatusOr<std::vector<Value>> cross_shard_gradients(GraphBuilder& b, Value loss,
                                                         const std::vector<Value>& wrt,
                                                         uint32_t num_shards,
                                                         ShardReduction reduction);

}  // namespace tpusim::runtime
