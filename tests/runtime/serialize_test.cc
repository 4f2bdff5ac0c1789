// Graphs survive a round trip through GraphDef node for node; a tampered GraphDef is refused
// with the node named.
#include "runtime/graph/serialize.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/graph/builder.h"
#include "runtime/models/zoo.h"

namespace tpusim::runtime {
namespace serialize_test {

using ::testing::HasSubstr;

TEST(Serialize, EveryZooTrainingStepRoundTrips) {
  for (const auto& m : models::model_infos()) {
    GraphBuilder b;
    ASSERT_TRUE(models::build_training_step(b, m.name, 4, 0.1f, 3).ok()) << m.name;
    const GraphDef def = to_proto(b.graph());
    std::string bytes;
    ASSERT_TRUE(def.SerializeToString(&bytes));
    GraphDef parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    auto back = from_proto(parsed);
    ASSERT_TRUE(back.ok()) << m.name << ": " << back.status();
    EXPECT_EQ(back->dump(), b.graph().dump()) << m.name;
    EXPECT_EQ(back->updates().size(), b.graph().updates().size());
    for (int id : back->variables()) {
      const Node& a = back->node(id);
      const Node& o = b.graph().node(id);
      EXPECT_EQ(a.attrs.initializer.kind, o.attrs.initializer.kind) << a.attrs.name;
      EXPECT_EQ(a.attrs.initializer.seed, o.attrs.initializer.seed) << a.attrs.name;
    }
  }
}

TEST(Serialize, ATamperedGraphIsRefusedWithTheNodeNamed) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 3});
  b.output("y", b.matmul(x, b.constant(HostTensor::from({3, 4}, std::vector<float>(12, 1.0f)))));
  const GraphDef good = to_proto(b.graph());
  GraphDef bad = good;
  bad.mutable_node(1)->set_shape(0, 5);  // the constant's shape no longer fits its values
  EXPECT_THAT(std::string(from_proto(bad).status().message()), HasSubstr("graph node 1 (constant"));
  bad = good;
  bad.mutable_node(2)->set_shape(1, 7);
  EXPECT_THAT(std::string(from_proto(bad).status().message()),
              HasSubstr("graph node 2 (matmul 'matmul'): is stored as f32[2, 7] but its inputs "
                        "make f32[2, 4]"));
  bad = good;
  bad.mutable_node(2)->set_op("teleport");
  EXPECT_THAT(std::string(from_proto(bad).status().message()),
              HasSubstr("graph node 2 (teleport 'matmul'): unknown op"));
  bad = good;
  bad.mutable_node(2)->set_input(0, 2);
  EXPECT_THAT(std::string(from_proto(bad).status().message()),
              HasSubstr("input 2 is not an earlier node"));
  bad = good;
  bad.mutable_output(0)->set_node(9);
  EXPECT_THAT(std::string(from_proto(bad).status().message()),
              HasSubstr("output 'y' names no node"));
}

// Stored shapes whose element counts overflow or are negative are refused before any count is
// worked out or anything reserved (fuzz_saved_model found a reshape's stored shape overflowing
// int64 in GraphBuilder::reshape).
TEST(Serialize, HostileStoredShapesAreRefusedBeforeTheyAreCounted) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 6});
  const Value c = b.constant(HostTensor::from({3}, std::vector<float>(3, 1.0f)));
  b.output("y", b.reshape(x, {3, 4}));
  b.output("c", c);
  const GraphDef good = to_proto(b.graph());
  GraphDef bad = good;
  const int64_t huge = int64_t{600527894772449280};
  bad.mutable_node(2)->set_shape(0, huge);  // times 4 overflows int64
  EXPECT_THAT(std::string(from_proto(bad).status().message()),
              HasSubstr("graph node 2 (reshape 'reshape'): its shape [600527894772449280, 4] "
                        "has a negative size or more than 2^40 elements"));
  bad = good;
  bad.mutable_node(2)->set_shape(1, -4);
  EXPECT_THAT(std::string(from_proto(bad).status().message()), HasSubstr("negative size"));
  bad = good;
  bad.mutable_node(1)->mutable_value()->set_shape(0, huge);  // a constant of 3 values
  EXPECT_THAT(std::string(from_proto(bad).status().message()),
              HasSubstr("graph node 1 (constant 'constant'): the constant holds 3 values; its "
                        "shape [600527894772449280] needs more, or has a negative size"));
}

// A stored graph inside a larger one (a saved model as a training step's forward pass): the
// infeed it is fed is no node of its own, its variables and labels come along, and a feed of
// another shape is refused naming the infeed.
TEST(Serialize, AGraphIsReplayedIntoAnotherWithItsInfeedFed) {
  GraphBuilder saved;
  const Value x = saved.infeed("x", DType::kF32, {2, 3});
  const Value w = saved.variable("w", DType::kF32, {3, 4}, {});
  const Value y = saved.matmul(x, w);
  saved.mutable_graph().mutable_node(y.id).label = "dense/matmul";
  saved.output("prediction/y", y);
  const GraphDef def = to_proto(saved.graph());

  GraphBuilder b;
  const Value image = b.infeed("image", DType::kF32, {2, 3});
  const Value fed = b.unary(Op::kNeg, image);
  auto values = replay(def, b, {{"x", fed}});
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 3u);
  EXPECT_EQ((*values)[0].id, fed.id);
  EXPECT_EQ(b.graph().infeeds(), std::vector<int>{image.id});
  EXPECT_EQ(b.graph().find_variable("w"), (*values)[1].id);
  const Node& matmul = b.graph().node((*values)[2].id);
  EXPECT_EQ(matmul.op, Op::kMatMul);
  EXPECT_EQ(matmul.label, "dense/matmul");
  EXPECT_EQ(matmul.inputs, (std::vector<int>{fed.id, (*values)[1].id}));

  GraphBuilder other;
  const Value wide = other.infeed("image", DType::kF32, {2, 5});
  EXPECT_THAT(std::string(replay(def, other, {{"x", wide}}).status().message()),
              HasSubstr("graph node 0 (infeed 'infeed'): is fed f32[2, 3] but is given f32[2, 5]"));
}

}  // namespace serialize_test
}  // namespace tpusim::runtime
