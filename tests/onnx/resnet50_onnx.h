#pragma once
// ResNet-50 v1.5 written as an ONNX model (NCHW, as torchvision's exports it), built layer for
// layer as the zoo's resnet50 (runtime/models/zoo.cc): 7x7/2 stem with fixed padding, batch norm
// (momentum 0.9, epsilon 1e-5) after every convolution, a 3x3/2 max pool with TensorFlow's SAME
// padding, bottlenecks [3, 4, 6, 3] with the stride on the 3x3 and a projection on each group's
// first, global average pool, dense 1000. Weights drawn from `seed`. For the importer's
// full-size tests and its benchmark.

#include <cstdint>

#include <onnx/onnx_pb.h>

namespace tpusim::runtime::onnx_import::testing {

onnx::ModelProto resnet50_v15(uint64_t seed);

}  // namespace tpusim::runtime::onnx_import::testing
