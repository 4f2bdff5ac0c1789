// ResNet-50 v1.5 as an ONNX file (NCHW, resnet50_onnx.h) imports as the zoo's resnet50: the same
// parameters and forward FLOPs, and no transpose anywhere when the images come NHWC.
#include <gtest/gtest.h>

#include "runtime/models/zoo.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/onnx/resnet50_onnx.h"

namespace tpusim::runtime::onnx_import {
namespace onnx_resnet50_test {

TEST(OnnxResNet50, ImportsAsTheZoosResNet50) {
  const std::string bytes = testing::resnet50_v15(1).SerializeAsString();
  auto model = parse_onnx(bytes, "resnet50.onnx", 2);
  ASSERT_TRUE(model.ok()) << model.status();
  GraphBuilder b;
  const Value images = b.infeed("images", DType::kF32, {2, 224, 224, 3});
  ImportOptions options;
  options.nhwc_inputs = {"images"};
  auto imported = import_graph(b, *model, {{"images", images}}, options);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->outputs.at("logits").shape(), Shape({2, 1000}));
  EXPECT_EQ(testing::count_ops(b.graph(), Op::kTranspose), 0);
  GraphBuilder zoo;
  auto logits = models::build_model(zoo, "resnet50",
                                    zoo.infeed("image", DType::kF32, {2, 224, 224, 3}), false, 1);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const GraphSize ours = graph_size(b.graph()), theirs = graph_size(zoo.graph());
  EXPECT_EQ(ours.parameters, theirs.parameters);
  EXPECT_EQ(ours.trainable_parameters, theirs.trainable_parameters);
  EXPECT_EQ(ours.trainable_parameters, 25557032);  // and 53,120 moving statistics
  EXPECT_DOUBLE_EQ(ours.matmul_flops, theirs.matmul_flops);
  EXPECT_EQ(imported->statistics.size(), 2u * 53);  // 53 batch norms
}

}  // namespace onnx_resnet50_test
}  // namespace tpusim::runtime::onnx_import
