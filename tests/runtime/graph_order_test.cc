// A model's nodes are made in one order on every compiler. The order of a graph's nodes is the
// order tpusim's compiler schedules them in, so it decides the program, its addresses and its
// cycles. C++ leaves the order of an expression's operands open: in `one_hot(labels) *
// log_softmax(logits)` g++ made the right operand's nodes first and clang the left's, and a
// clang build simulated every image model's step in other cycles than g++'s. Each zoo model's
// training step, and each optimizer's update, is fingerprinted here node by node, the
// fingerprints pinned; tpusim_graph_tests also runs in clang's build (make test-asan-readers,
// in CI), where a model whose nodes come in another order fails.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/graph/autodiff.h"
#include "runtime/graph/layers.h"
#include "runtime/graph/optimizers.h"
#include "runtime/models/zoo.h"

namespace tpusim::runtime {
namespace graph_order_test {

// FNV-1a over the graph's dump: every node in order, its op, inputs, dtype, shape and label.
uint64_t fingerprint(const Graph& g) {
  uint64_t hash = 1469598103934665603ull;
  for (char c : g.dump()) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

struct StepCase {
  std::string model;
  models::DTypePolicy policy;
  uint32_t replicas;
  uint64_t pinned;
};

TEST(GraphOrder, EveryZooModelsTrainingStepIsMadeInOneOrder) {
  using models::DTypePolicy;
  const std::vector<StepCase> cases = {
      {"mlp", DTypePolicy::kFloat32, 1, 13059402657951049409ull},
      {"mnist_cnn", DTypePolicy::kFloat32, 1, 14379974004784901147ull},
      {"mnist_cnn", DTypePolicy::kMixedBFloat16, 2, 4882809635872807952ull},
      {"resnet_small", DTypePolicy::kFloat32, 1, 3609963147973724329ull},
      {"resnet_small", DTypePolicy::kMixedBFloat16, 2, 10401639708293462974ull},
      {"image_cnn", DTypePolicy::kFloat32, 1, 10342104687851968623ull},
      {"transformer", DTypePolicy::kFloat32, 1, 15897617330797511880ull},
      {"transformer", DTypePolicy::kMixedBFloat16, 2, 5784378402747719007ull},
      {"bert_tiny", DTypePolicy::kFloat32, 1, 8359784835289348890ull},
  };
  for (const StepCase& c : cases) {
    GraphBuilder b;
    const int64_t side = c.model == "image_cnn" ? 32 : 0;
    ASSERT_TRUE(
        models::build_training_step(b, c.model, 2, 0.1f, 7, c.policy, c.replicas, side, 16).ok())
        << c.model << ": " << b.status();
    EXPECT_EQ(fingerprint(b.graph()), c.pinned)
        << c.model << " " << models::dtype_policy_name(c.policy) << " x" << c.replicas;
  }
}

// Each optimizer's update (and clip_by_global_norm) over a model with batch norm (resnet_small)
// and one with layer norm (transformer).
TEST(GraphOrder, EveryOptimizersUpdateIsMadeInOneOrder) {
  struct OptimizerCase {
    OptimizerSpec::Kind kind;
    bool nesterov_or_clip;
    uint64_t pinned_resnet, pinned_transformer;
  };
  const std::vector<OptimizerCase> cases = {
      {OptimizerSpec::Kind::kSgd, false, 10059869360283062103ull, 18163451683519086311ull},
      {OptimizerSpec::Kind::kMomentum, true, 12879015439977291015ull, 2759667682431471509ull},
      {OptimizerSpec::Kind::kAdam, false, 4468592221941408633ull, 8859553588783228352ull},
      {OptimizerSpec::Kind::kLamb, true, 13763313013133193854ull, 4245188143379963327ull},
  };
  for (const OptimizerCase& c : cases) {
    for (const std::string model : {"resnet_small", "transformer"}) {
      GraphBuilder b;
      const Value images = b.infeed("image", DType::kF32, {2, 28, 28, 1});
      const Value labels = b.infeed("label", DType::kS32, {2});
      auto logits = models::build_model(b, model, images, /*training=*/true, 7);
      ASSERT_TRUE(logits.ok()) << logits.status();
      const Value loss =
          layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, *logits), {0});
      std::vector<Value> vars;
      for (int id : b.graph().variables()) {
        if (!is_statistic(b.graph().node(id).attrs.name)) vars.push_back(Value{id, &b});
      }
      auto grads = gradients(b, loss, vars);
      ASSERT_TRUE(grads.ok()) << grads.status();
      OptimizerSpec spec = optimizer_defaults(c.kind);
      spec.nesterov = c.nesterov_or_clip && c.kind == OptimizerSpec::Kind::kMomentum;
      if (c.nesterov_or_clip && c.kind == OptimizerSpec::Kind::kLamb) spec.clip_global_norm = 1.0f;
      ASSERT_TRUE(apply_gradients(b, spec, vars, *grads).ok()) << b.status();
      EXPECT_EQ(fingerprint(b.graph()),
                model == "resnet_small" ? c.pinned_resnet : c.pinned_transformer)
          << model << " " << optimizer_name(c.kind);
    }
  }
}

}  // namespace graph_order_test
}  // namespace tpusim::runtime
