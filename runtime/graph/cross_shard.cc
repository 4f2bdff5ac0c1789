#include "runtime/graph/cross_shard.h"

#include "common/strings.h"
#include "runtime/graph/autodiff.h"

namespace tpusim::runtime {

absl::StatusOr<std::vector<Value>> cross_shard_gradients(GraphBuilder& b, Value loss,
                                                         const std::vector<Value>& wrt,
                                                         uint32_t num_shards,
                                                         ShardReduction reduction) {
  if (num_shards == 0) return absl::InvalidArgumentError("cross_shard_gradients: 0 shards");
  const Value scaled =
      reduction == ShardReduction::kMean ? loss * (1.0f / static_cast<float>(num_shards)) : loss;
  auto grads = gradients(b, scaled, wrt);
  if (!grads.ok()) return grads.status();
  std::vector<Value> summed;
  summed.reserve(grads->size());
  for (const Value& g : *grads) summed.push_back(b.cross_replica_sum(g));
  return summed;
}

}  // namespace tpusim::runtime
