// The zoo's published-size models at their published sizes: what papers and TensorFlow's
// reference models say their parameters and FLOPs are.
#include <gtest/gtest.h>

#include "runtime/graph/builder.h"
#include "runtime/models/zoo.h"

namespace tpusim::runtime {
namespace zoo_full_size_test {

// The forward pass of `model` on one example of its published input.
GraphSize forward_size(const std::string& model) {
  auto info = models::model_info(model);
  EXPECT_TRUE(info.ok()) << info.status();
  GraphBuilder b;
  const Value images =
      b.infeed("image", DType::kF32, {1, info->image_side, info->image_side, info->image_channels});
  auto logits = models::build_model(b, model, images, /*training=*/false, 1);
  EXPECT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape(), Shape({1, info->classes}));
  return graph_size(b.graph());
}

// ResNet-50 v1.5 (TensorFlow's TPU reference, convolutions without bias): 25,557,032 trainable
// parameters and 53,120 batch-norm statistics; 4.09 G multiply-accumulates per 224x224 image
// forward (the 7x7 stem 118 M, the stride on the 3x3s: torchvision's resnet50, the same
// network, counts 4.09 GMACs).
TEST(ZooFullSize, ResNet50HasItsPublishedSize) {
  const GraphSize s = forward_size("resnet50");
  EXPECT_EQ(s.trainable_parameters, 25'557'032);
  EXPECT_EQ(s.parameters - s.trainable_parameters, 53'120);
  EXPECT_NEAR(s.matmul_flops / 2, 4.09e9, 0.01e9);
}

// v1.5's strided convolutions pad explicitly (TensorFlow's fixed_padding): the 7x7/2 stem pads
// 3 before and after, so 224 -> 112 with the first window centred on pixel 0 (SAME would pad 2
// before and 3 after).
TEST(ZooFullSize, ResNet50StemPadsAsFixedPadding) {
  GraphBuilder b;
  const Value images = b.infeed("image", DType::kF32, {2, 224, 224, 3});
  ASSERT_TRUE(models::build_model(b, "resnet50", images, true, 1).ok()) << b.status();
  const Node* stem = nullptr;
  for (const Node& n : b.graph().nodes()) {
    if (n.op == Op::kExtractPatches) {
      stem = &n;
      break;
    }
  }
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->shape, Shape({2, 112, 112, 7 * 7 * 3}));
  const Window& w = stem->attrs.window;
  EXPECT_TRUE(w.explicit_padding);
  EXPECT_EQ(w.pad_top, 3);
  EXPECT_EQ(w.pad_bottom, 3);
  EXPECT_EQ(w.pad_left, 3);
  EXPECT_EQ(w.pad_right, 3);
}

TEST(ZooFullSize, ExplicitPaddingOutOfRangeIsRefusedNamingIt) {
  GraphBuilder b;
  const Value images = b.infeed("image", DType::kF32, {1, 8, 8, 1});
  Window w;
  w.kh = w.kw = 3;
  w.sh = w.sw = 2;
  w.explicit_padding = true;
  w.pad_top = 3;
  EXPECT_FALSE(b.extract_patches(images, w).valid());
  EXPECT_NE(b.status().message().find("explicit padding (3, 0, 0, 0)"), std::string::npos)
      << b.status();
}

}  // namespace zoo_full_size_test
}  // namespace tpusim::runtime
