// What the tpusim compiler keeps in HBM across a training step, as XLA decides it for a TPU:
// convolution patches are built again for the kernel gradient instead of being kept from the
// forward pass, chains of cheap elementwise producers are recomputed where they are read, and
// ResNet-50 at its published per-core batch fits a v3 core's HBM (with its patches built again:
// XLA's rematerialization, for a step that would not fit otherwise).
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/rematerialize.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"
#include "sim/isa/validator.h"

namespace tpusim::runtime::tpusim_backend {
namespace tpusim_step_memory_test {

const config::SliceSpec& v3_8() {
  static const config::SliceSpec spec = **config::load_slice("v3-8");
  return spec;
}

bool has_buffer(const CompiledStep& step, int id) {
  return step.plan.owner[static_cast<size_t>(id)] == id &&
         step.plan.address[static_cast<size_t>(id)] != 0;
}

// A convolution's kernel gradient reads its patches again: that reader gets a copy of the
// extract_patches, added right before it; every other node keeps its place and its inputs.
TEST(StepMemory, PatchesAreBuiltAgainForTheKernelGradient) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 6, 6, 3});
  const Value kernel =
      b.variable("kernel", DType::kF32, {3, 3, 3, 4}, Initializer{InitKind::kGlorotUniform});
  Window w;
  w.kh = w.kw = 3;
  w.same = true;
  const Value patches = b.extract_patches(x, w);
  const Value y = b.matmul(patches, b.reshape(kernel, {27, 4}));
  const Value loss = layers::reduce_mean(b.unary(Op::kSquare, y), {0, 1, 2, 3});
  auto grads = gradients(b, loss, {kernel});
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.output("grad", (*grads)[0]);
  ASSERT_TRUE(b.status().ok()) << b.status();

  const auto remat = rematerialize_patches(b.graph());
  ASSERT_NE(remat, nullptr);
  const Graph& g = remat->graph;
  EXPECT_EQ(g.size(), b.graph().size() + 1);
  int copies = 0;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op != Op::kExtractPatches || remat->new_id[static_cast<size_t>(patches.id)] == id)
      continue;
    ++copies;
    EXPECT_EQ(n.label, b.graph().node(patches.id).label + "/rematerialized");
    EXPECT_EQ(n.inputs, std::vector<int>{remat->new_id[static_cast<size_t>(x.id)]});
    EXPECT_EQ(remat->old_id[static_cast<size_t>(id)], patches.id);
    // Its one reader is the next node, the kernel gradient's first step.
    ASSERT_LT(id + 1, g.size());
    EXPECT_EQ(g.node(id + 1).inputs, std::vector<int>{id});
  }
  EXPECT_EQ(copies, 1);
  for (int id = 0; id < b.graph().size(); ++id) {
    const int now = remat->new_id[static_cast<size_t>(id)];
    EXPECT_EQ(remat->old_id[static_cast<size_t>(now)], id);
    EXPECT_EQ(g.node(now).label, b.graph().node(id).label);
  }
  // A step this small fits with its patches kept: compiled as given.
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  EXPECT_EQ(step->plan.address.size(), static_cast<size_t>(b.graph().size()));
  EXPECT_EQ(step->outputs.at(0).node, (*grads)[0].id);
  EXPECT_EQ(step->rematerialized_nodes, 0u);
}

TEST(StepMemory, APatchesNodeReadOnceIsLeftAlone) {
  GraphBuilder b;
  Window w;
  w.kh = w.kw = 2;
  w.sh = w.sw = 2;
  b.output("patches", b.extract_patches(b.infeed("x", DType::kF32, {1, 4, 4, 1}), w));
  EXPECT_EQ(rematerialize_patches(b.graph()), nullptr);
}

// d = x - y is read by m = 3d (itself read by two groups, so recomputed in each) and by a third
// group: d is recomputed too, in the third group and in each group that recomputes m, so neither
// has a buffer (batch norm's x - mean and its product with the inverse deviation).
TEST(StepMemory, ChainsOfCheapProducersAreRecomputedWhole) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 64});
  const Value y = b.infeed("y", DType::kF32, {64, 64});
  const Value d = x - y;
  const Value m = d * 3.0f;
  b.output("p", m * m + 1.0f);
  b.output("q", b.unary(Op::kExp, m));
  b.output("r", d * d + x);
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  EXPECT_EQ(step->recomputed_nodes, 2u);
  EXPECT_FALSE(has_buffer(*step, d.id));
  EXPECT_FALSE(has_buffer(*step, m.id));
  EXPECT_EQ(step->instructions_per_op.count("sub"), 0u);
}

// A 4 GiB value held across the peak for a later reader that can compute it again from what is
// live there anyway (a = x + 1, x read at the end too) is recomputed there: its buffer is freed
// after its first reader and the step fits a v3 core's 16 GiB. The transposes stand for values
// that must be kept.
TEST(StepMemory, ValuesHeldAtThePeakAreComputedAgainWhereReadLater) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32768, 32768});  // 4 GiB
  const Value a = x + 1.0f;
  const Value t1 = b.transpose(a, {1, 0});
  const Value t2 = b.transpose(t1, {1, 0});
  b.output("z", (t2 + a) - x);  // at t2: x, a, t1 and t2, 16 GiB and more
  ASSERT_TRUE(b.status().ok()) << b.status();
  StepPlan refused;
  auto plan = plan_step(b.graph(), v3_8(), 0, {}, &refused);
  ASSERT_TRUE(absl::IsResourceExhausted(plan.status())) << plan.status();
  const auto remat = rematerialize_at_peak(b.graph(), refused);
  ASSERT_NE(remat, nullptr);
  const Graph& g = remat->graph;
  ASSERT_EQ(g.size(), b.graph().size() + 1);
  int copies = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (g.node(id).label.find("/rematerialized") == std::string::npos) continue;
    ++copies;
    // The copy is a's add, read from x (and the constant 1) right before the final sum.
    EXPECT_EQ(remat->old_id[static_cast<size_t>(id)], a.id);
    EXPECT_EQ(g.node(id).op, Op::kAdd);
    EXPECT_EQ(g.node(id).inputs.at(0), remat->new_id[static_cast<size_t>(x.id)]);
    EXPECT_EQ(g.node(id + 1).inputs.at(1), id);
  }
  EXPECT_EQ(copies, 1);
  auto fits = plan_step(g, v3_8(), 0, {});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_LT(fits->hbm.device_peak_bytes, refused.hbm.device_peak_bytes);
  // Nothing held at the new plan's peak needs computing again: no further rewrite.
  EXPECT_EQ(rematerialize_at_peak(g, *fits), nullptr);
}

// When all the values that could be computed again would not cover the excess, the step is
// refused at once, saying how much they would have freed: here a is 4 GiB of recomputable value,
// but the peak (x, y, a and two transposes, 20 GiB, at t2) is 4 GiB and the constants over a
// core's 16 GiB.
TEST(StepMemory, RematerializationThatCannotFitIsNotTried) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32768, 32768});
  const Value y = b.infeed("y", DType::kF32, {32768, 32768});
  const Value a = x + 1.0f;
  const Value t1 = b.transpose(a, {1, 0});
  const Value t2 = b.transpose(t1, {1, 0});
  b.output("z", ((t2 + a) - x) + y);
  ASSERT_TRUE(b.status().ok()) << b.status();
  StepPlan refused;
  auto plan = plan_step(b.graph(), v3_8(), 0, {}, &refused);
  ASSERT_TRUE(absl::IsResourceExhausted(plan.status())) << plan.status();
  uint64_t recomputable = 0;
  EXPECT_EQ(rematerialize_at_peak(b.graph(), refused, &recomputable), nullptr) << plan.status();
  EXPECT_EQ(recomputable, 4294967296u);  // a
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("could free 4294967296 bytes there"), std::string::npos)
      << step.status();
}

// A dropout mask is drawn from random numbers no later reader can draw again (TensorFlow's are
// stateful): held at the peak, it stays, and the step is refused naming what holds the peak.
TEST(StepMemory, RandomMasksAreNeverComputedAgain) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32768, 32768});
  const Value mask = b.binary(Op::kGreater, b.rng_uniform(x.shape(), 7),
                              b.broadcast(b.scalar(0.1f), x.shape(), {}));
  const Value t1 = b.transpose(mask, {1, 0});
  const Value t2 = b.transpose(t1, {1, 0});
  b.output("z", (t2 + mask) - x);
  ASSERT_TRUE(b.status().ok()) << b.status();
  StepPlan refused;
  auto plan = plan_step(b.graph(), v3_8(), 0, {}, &refused);
  ASSERT_TRUE(absl::IsResourceExhausted(plan.status())) << plan.status();
  EXPECT_EQ(rematerialize_at_peak(b.graph(), refused), nullptr);
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("At the peak"), std::string::npos) << step.status();
}

// BERT-Large at length 512 and MLPerf's 14 sequences a v3 core (448 over v3-32): its tensors
// would need 18.7 GB at their peak with the dropped attention probabilities written;
// rematerializing them and GELU's products where the backward pass reads them, as XLA would,
// fits the core's 16 GiB. Made by the products that read them (fusion_plan.h, "groups recomputed
// by their readers") the dropped probabilities are never held, and the step fits as planned. At
// 8 a core it fits as planned either way and nothing is computed twice.
TEST(StepMemory, BertLargeFitsAV3CoreAtMlperfsBatchByRematerializing) {
  const uint64_t share = v3_8().chip.hbm.capacity_bytes / 2;
  for (const int64_t batch : {8, 14}) {
    GraphBuilder b;
    ASSERT_TRUE(models::build_training_step(b, "bert_large", batch, 1e-4f, 1,
                                            models::DTypePolicy::kMixedBFloat16, 1, 0, 512)
                    .ok())
        << b.status();
    for (const bool made : {true, false}) {
      StepOptions options;
      options.fuse_matmul_producers = made;
      auto step = compile_graph(b.graph(), v3_8(), 0, options);
      ASSERT_TRUE(step.ok()) << batch << ": " << step.status();
      EXPECT_LE(step->hbm_bytes, share) << batch;
      if (batch == 8 || made) {
        EXPECT_EQ(step->rematerialized_nodes, 0u) << batch;
      } else {
        EXPECT_GT(step->rematerialized_nodes, 0u);
      }
      EXPECT_EQ(step->plan.address.size(), static_cast<size_t>(b.graph().size()));
    }
  }
}

// ResNet-50 v1.5 in mixed_bfloat16 at the MLPerf per-core batch (1024 over a v3-8's 8 cores)
// fits a core's 16 GiB: what a TPU keeps (each layer's input and its convolution's output for
// the backward pass), not every layer's patches and batch-norm intermediates.
TEST(StepMemory, ResNet50FitsAV3CoreAtBatch128) {
  GraphBuilder b;
  ASSERT_TRUE(
      models::build_training_step(b, "resnet50", 128, 0.1f, 1, models::DTypePolicy::kMixedBFloat16)
          .ok())
      << b.status();
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  const uint64_t share = v3_8().chip.hbm.capacity_bytes / 2;
  EXPECT_LE(step->hbm_bytes, share);
  // The activations are most of it: 5.2 GB, where the variables and constants take 0.1 GB.
  EXPECT_GT(step->hbm_bytes, share / 4);
  EXPECT_GT(step->hbm_bytes, 45 * step->plan.persistent_bytes);
  // Every convolution's patches are built again in VMEM (with them kept it would not fit) but
  // the stage-4 3x3 ones' and their kernel gradients' (kernels of 9.4 MB in f32 against the
  // 4 MiB once-loaded region), 44 of the 53 batch norms' two moments are summed by the forward
  // convolution that produces their input (the other 9 follow 1x1 convolutions whose 4 MiB
  // kernels fill that region), and the step still speaks the given graph's ids.
  EXPECT_EQ(step->fused_convolutions, 146u);
  EXPECT_EQ(step->conv_output_reductions, 88u);
  EXPECT_EQ(step->plan.address.size(), static_cast<size_t>(b.graph().size()));
  EXPECT_EQ(step->outputs.at(0).node, b.graph().outputs().at(0).node);
}

}  // namespace tpusim_step_memory_test
}  // namespace tpusim::runtime::tpusim_backend
