#pragma once
// Training graphs' outputs for the tests that compare the tpusim compiler's fusions with the
// fragments they replace: a loss and its gradients, as a training step computes them.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/graph/autodiff.h"
#include "runtime/graph/layers.h"

namespace tpusim::runtime::testing {

// Outputs `loss` and its gradients with respect to `x` and every trainable variable (batch norm's
// moving statistics are no gradient's), as "loss" and "grad0" (x's), "grad1", ...; returns how
// many outputs, 0 when the graph is broken.
inline size_t output_loss_and_gradients(GraphBuilder& b, Value loss, Value x) {
  std::vector<Value> wrt{x};
  for (int id : b.graph().variables()) {
    if (b.graph().node(id).attrs.name.find("moving_") == std::string::npos)
      wrt.push_back(Value{id, &b});
  }
  auto grads = gradients(b, loss, wrt);
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (!grads.ok()) return 0;
  b.output("loss", loss);
  for (size_t i = 0; i < wrt.size(); ++i) b.output("grad" + std::to_string(i), (*grads)[i]);
  EXPECT_TRUE(b.status().ok()) << b.status();
  return b.status().ok() ? wrt.size() + 1 : 0;
}

// Outputs `loss` and its gradient with respect to each variable, named as the variable; false
// when the graph is broken.
inline bool output_loss_and_variable_gradients(GraphBuilder& b, Value loss) {
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = gradients(b, loss, vars);
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (!grads.ok()) return false;
  b.output("loss", loss);
  for (size_t i = 0; i < vars.size(); ++i)
    b.output(b.graph().node(vars[i].id).attrs.name, (*grads)[i]);
  EXPECT_TRUE(b.status().ok()) << b.status();
  return b.status().ok();
}

// The mean softmax cross-entropy of a dense layer over `features` against an infed "labels" of
// 4 classes, one per example.
inline Value classification_loss(GraphBuilder& b, Value features, int layer) {
  const Value labels = b.infeed("labels", DType::kS32, {features.shape().dim(0)});
  const Value logits = layers::dense(b, features, 4, layers::Activation::kNone, layer);
  return layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
}

// One convolution of a batch-normed net: filters, a square kernel, its stride and padding.
struct NormedConv {
  int64_t filters, kernel, stride;
  layers::Padding padding = layers::Padding::kSame;
};

// Convolutions (without bias) over `x` (cast to bf16 first for kBF16), each followed by a batch
// norm in training and a ReLU, then the mean over the pixels in f32: the features of a
// batch-normed convolutional net. The layers are numbered from 1.
inline Value batch_normed_convolutions(GraphBuilder& b, Value x, DType dtype,
                                       const std::vector<NormedConv>& convs) {
  Value h = dtype == DType::kBF16 ? b.cast(x, DType::kBF16) : x;
  int layer = 1;
  for (const NormedConv& c : convs) {
    h = layers::conv2d(b, h, c.filters, c.kernel, c.stride, c.padding, layers::Activation::kNone,
                       layer++, false);
    h = b.unary(Op::kRelu, layers::batch_normalization(b, h, true));
  }
  return layers::reduce_mean(b.cast(h, DType::kF32), {1, 2});
}

}  // namespace tpusim::runtime::testing
