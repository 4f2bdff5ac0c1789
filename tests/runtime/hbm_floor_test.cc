// The HBM floor of a training step's graph (runtime/graph/hbm_floor.h), on steps small enough to
// count by hand.
#include "runtime/graph/hbm_floor.h"

#include <gtest/gtest.h>

#include "runtime/graph/autodiff.h"
#include "runtime/graph/builder.h"

namespace tpusim::runtime {
namespace hbm_floor_test {

// loss = sum(relu(x w)), w updated by SGD, with the gradient summed across replicas when
// `all_reduce`; x is bf16 when `bf16_input` and is widened before the product.
Graph step(bool all_reduce, bool bf16_input) {
  GraphBuilder b;
  Value x = b.infeed("x", bf16_input ? DType::kBF16 : DType::kF32, Shape{4, 3});
  if (bf16_input) x = b.cast(x, DType::kF32);
  const Value w = b.variable("w", DType::kF32, Shape{3, 2}, Initializer{});
  const Value frozen = b.variable("frozen", DType::kF32, Shape{2}, Initializer{});
  const Value y = b.matmul(x, w);
  const Value r = b.unary(Op::kRelu, b.binary(Op::kAdd, y, b.broadcast_to(frozen, Shape{4, 2})));
  const Value loss = b.reduce(Op::kReduceSum, r, {0, 1});
  auto grads = gradients(b, loss, {w});
  EXPECT_TRUE(grads.ok()) << grads.status();
  Value g = (*grads)[0];
  if (all_reduce) g = b.cross_replica_sum(g);
  b.update(w, b.binary(Op::kSub, w, b.binary(Op::kMul, b.scalar(0.1f), g)));
  b.output("loss", loss);
  return b.graph();
}

// Inputs: x once (4 x 3 f32, 48 bytes). Variables: w read and written (2 x 24), `frozen` read
// (8). Gradients: dw (3 x 2 f32) written and read (48). Saved: relu's gradient reads relu's
// output (4 x 2 f32), written and read (64); the product's gradient reads x, an input, counted
// once as the input it is.
TEST(HbmFloor, CountsEachValueAsItsKindOnce) {
  const HbmFloor f = hbm_floor(step(false, false));
  EXPECT_EQ(f.inputs, 48);
  EXPECT_EQ(f.variables, 2 * 24 + 8);
  EXPECT_EQ(f.gradients, 48);
  EXPECT_EQ(f.saved_activations, 64);
  EXPECT_EQ(f.total(), 48 + 56 + 48 + 64);
  const HbmFloor two = f.scaled(2);
  EXPECT_EQ(two.total(), 2 * f.total());
  EXPECT_EQ(two.saved_activations, 128);
}

// The all-reduce reads the gradient as the update did: the same floor. A bf16 input is read as
// its 2 bytes an element however it is widened (the widened copy is a view of it), and the
// product's gradient reading it is no saved activation.
TEST(HbmFloor, AllReducesAndWideningCastsMoveNothingMore) {
  EXPECT_EQ(hbm_floor(step(true, false)).total(), hbm_floor(step(false, false)).total());
  const HbmFloor bf16 = hbm_floor(step(false, true));
  EXPECT_EQ(bf16.inputs, 24);
  EXPECT_EQ(bf16.saved_activations, 64);
}

// Autodiff's gradient of a constant factor reads the product it scales, but no update needs it:
// a dead node reads nothing, so loss = sum(2 (x w)) saves nothing. A value read through a view
// (a reshape of the product, read back by a later backward op) counts once as the product.
TEST(HbmFloor, DeadGradientsReadNothingAndViewsAreTheirInput) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, Shape{4, 3});
  const Value w = b.variable("w", DType::kF32, Shape{3, 2}, Initializer{});
  const Value y = b.matmul(x, w);
  const Value loss = b.reduce(Op::kReduceSum, b.binary(Op::kMul, y, b.scalar(2.0f)), {0, 1});
  auto grads = gradients(b, loss, {w});
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.update(w, b.binary(Op::kSub, w, (*grads)[0]));
  EXPECT_EQ(hbm_floor(b.graph()).saved_activations, 0);

  GraphBuilder c;
  const Value x2 = c.infeed("x", DType::kF32, Shape{4, 3});
  const Value w2 = c.variable("w", DType::kF32, Shape{3, 2}, Initializer{});
  const Value flat = c.reshape(c.unary(Op::kTanh, c.matmul(x2, w2)), Shape{8});
  const Value loss2 = c.reduce(Op::kReduceSum, c.binary(Op::kMul, flat, flat), {0});
  auto grads2 = gradients(c, loss2, {w2});
  ASSERT_TRUE(grads2.ok()) << grads2.status();
  c.update(w2, c.binary(Op::kSub, w2, (*grads2)[0]));
  // tanh's gradient reads tanh's output and the square's reads `flat`, its reshape: one 4 x 2
  // f32 value, written and read.
  EXPECT_EQ(hbm_floor(c.graph()).saved_activations, 64);
}

// A graph without a backward pass (an evaluation step) saves nothing and has no gradients.
TEST(HbmFloor, AForwardStepSavesNothing) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, Shape{4, 3});
  const Value w = b.variable("w", DType::kF32, Shape{3, 2}, Initializer{});
  b.output("y", b.matmul(x, w));
  const HbmFloor f = hbm_floor(b.graph());
  EXPECT_EQ(f.inputs, 48);
  EXPECT_EQ(f.variables, 24);
  EXPECT_EQ(f.gradients, 0);
  EXPECT_EQ(f.saved_activations, 0);
}

}  // namespace hbm_floor_test
}  // namespace tpusim::runtime
