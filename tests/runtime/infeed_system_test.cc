// The infeed path end to end on a simulated v3-8: the infeed driver splits host batches over the
// 8 cores, the tpusim backend sends them over each chip's host link when the host model says they
// are ready, and each core's infeed dequeue waits while its queue is empty. The device waits only
// where the host is slower than the device. One System per process (one test per process).
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/cross_shard.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/infeed/infeed_driver.h"
#include "sim/numerics/bf16.h"

namespace tpusim::runtime {
namespace infeed_system_test {

constexpr uint32_t kReplicas = 8;  // the cores of a v3-8
constexpr int64_t kRowsPerCore = 32;

// A training step of a two-layer regression: MXU work, vector work and a weight update; with
// `cross_shard`, CrossShardOptimizer (MEAN) sums the gradients over the 8 replicas.
Graph training_step(bool cross_shard = false) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {kRowsPerCore, 256});
  const Value target = b.infeed("target", DType::kF32, {kRowsPerCore, 128});
  const Value h = layers::dense(b, x, 512, layers::Activation::kRelu, 1);
  const Value y = layers::dense(b, h, 128, layers::Activation::kNone, 2);
  const Value err = y - target;
  const Value loss = layers::reduce_mean(err * err, {0, 1});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = cross_shard ? cross_shard_gradients(b, loss, vars, kReplicas, ShardReduction::kMean)
                           : gradients(b, loss, vars);
  EXPECT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < vars.size(); ++i) {
    if (cross_shard) b.output(b.graph().node(vars[i].id).attrs.name, vars[i]);
    b.update(vars[i], vars[i] - (*grads)[i] * 0.01f);
  }
  b.output("loss", loss);
  EXPECT_TRUE(b.status().ok()) << b.status();
  return b.graph();
}

data::FeatureValue floats(std::vector<int64_t> shape, uint64_t seed) {
  data::FeatureValue v;
  v.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v.floats.push_back(static_cast<float>(s >> 40) / static_cast<float>(1 << 24) - 0.5f);
  }
  return v;
}

// `count` host batches: each is the 8 cores' batches stacked.
data::DatasetPtr host_batches(int count) {
  std::vector<data::Element> batches;
  for (int k = 0; k < count; ++k) {
    batches.push_back({{"x", floats({kReplicas * kRowsPerCore, 256}, 2 * k)},
                       {"target", floats({kReplicas * kRowsPerCore, 128}, 2 * k + 1)}});
  }
  return data::Dataset::from_elements(std::move(batches));
}

struct Loop {
  LoopResult result;
  uint64_t max_wait = 0;
};

// A driver for `steps` host batches that each cost the host `batch_seconds` (one stage, one
// thread).
std::unique_ptr<InfeedDriver> fed_by(const Graph& g, int steps, double batch_seconds,
                                     uint32_t prefetch_depth = 2) {
  InfeedOptions o;
  o.timing.prefetch_depth = prefetch_depth;
  o.replicas = kReplicas;
  o.timing.cpu_cores = 96;
  o.timing.stages = {{"map", 1}};
  o.timing.stage_seconds = {batch_seconds};
  auto driver = InfeedDriver::create(g, {{host_batches(steps), nullptr}}, o);
  EXPECT_TRUE(driver.ok()) << driver.status();
  return driver.ok() ? *std::move(driver) : nullptr;
}

// The driver's next `steps` steps as one device loop.
Loop run_loop(Backend& backend, Executable& exe, Variables& vars, InfeedDriver& driver, int steps) {
  auto loop = driver.next_loop(static_cast<uint32_t>(steps), backend.device_now_seconds());
  EXPECT_TRUE(loop.ok()) << loop.status();
  auto run = backend.run_loop(exe, vars, *loop, 0);
  EXPECT_TRUE(run.ok()) << run.status();
  Loop out{*std::move(run)};
  EXPECT_EQ(out.result.timing.simulated, backend.declaration().supports.simulated_time);
  if (out.result.timing.simulated) {
    EXPECT_EQ(out.result.timing.infeed_wait_cycles.size(), kReplicas);
  }
  for (uint64_t w : out.result.timing.infeed_wait_cycles) out.max_wait = std::max(out.max_wait, w);
  return out;
}

// `steps` steps whose host batches each cost the host `batch_seconds`, as one loop.
Loop run_fed(Backend& backend, Executable& exe, Variables& vars, int steps, double batch_seconds) {
  auto driver = fed_by(exe.graph(), steps, batch_seconds);
  return run_loop(backend, exe, vars, *driver, steps);
}

constexpr double kHz = 940e6;  // the v3's core clock

// The training step on all 8 cores of the tpusim backend, and its step time with every batch
// ready at once: a loop of one step and one of ten are nine steps apart.
struct Measured {
  std::unique_ptr<Backend> tpu;
  std::unique_ptr<Executable> exe;
  Variables vars;
  Loop one, ten;
  uint64_t step_cycles = 0;
  double step_seconds = 0;
};

Measured measure_step() {
  Measured m;
  auto tpu = make_backend("tpusim");
  EXPECT_TRUE(tpu.ok()) << tpu.status();
  if (!tpu.ok()) return m;
  m.tpu = *std::move(tpu);
  const Graph g = training_step();
  auto exe = m.tpu->compile(g, {Precision::kFp32, kReplicas});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return m;
  m.exe = *std::move(exe);
  m.vars = initial_variables(g);
  m.one = run_fed(*m.tpu, *m.exe, m.vars, 1, 0);
  m.ten = run_fed(*m.tpu, *m.exe, m.vars, 10, 0);
  m.step_cycles = (m.ten.result.timing.cycles - m.one.result.timing.cycles) / 9;
  m.step_seconds = static_cast<double>(m.step_cycles) / kHz;
  return m;
}

// The same three fed steps of `g` on tpusim and on cpu (mxu precision: the same bf16 products),
// from the same initial variables; each side's variables afterwards.
struct BothBackends {
  Loop tpu, cpu;
  Variables on_tpu, on_cpu;
};

BothBackends run_on_both(const Graph& g, AllReduceAlgorithm allreduce = AllReduceAlgorithm::kRing) {
  BothBackends out;
  out.on_tpu = out.on_cpu = initial_variables(g);
  auto tpu = make_backend("tpusim");
  auto cpu = make_backend("cpu");
  auto tpu_exe = (*tpu)->compile(g, {Precision::kFp32, kReplicas, allreduce});
  auto cpu_exe = (*cpu)->compile(g, {Precision::kMxu, kReplicas});
  EXPECT_TRUE(tpu_exe.ok()) << tpu_exe.status();
  EXPECT_TRUE(cpu_exe.ok()) << cpu_exe.status();
  if (!tpu_exe.ok() || !cpu_exe.ok()) return out;
  out.tpu = run_fed(**tpu, **tpu_exe, out.on_tpu, 3, 0);
  out.cpu = run_fed(**cpu, **cpu_exe, out.on_cpu, 3, 0);
  return out;
}

void expect_same_variables(const BothBackends& b) {
  for (const auto& [name, value] : b.on_cpu) {
    for (size_t i = 0; i < value.f.size(); ++i)
      ASSERT_NEAR(b.on_tpu.at(name).f[i], value.f[i], 1e-5) << name << " [" << i << "]";
  }
}

// Each replica trains on its own slice of the host batch, on its own core, exactly as the cpu
// backend's replicas do.
TEST(InfeedSystem, ReplicasTrainOnTheirOwnShardsOnTheirOwnCores) {
  const BothBackends both = run_on_both(training_step());
  const Loop& t = both.tpu;
  const Loop& c = both.cpu;
  EXPECT_FALSE(c.result.timing.simulated);
  ASSERT_EQ(t.result.outputs.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    ASSERT_EQ(t.result.outputs[s].size(), kReplicas);
    for (size_t r = 0; r < kReplicas; ++r) {
      const float loss = t.result.outputs[s][r].at("loss").f[0];
      EXPECT_NEAR(loss, c.result.outputs[s][r].at("loss").f[0], 1e-5 * loss)
          << "step " << s << " replica " << r;
      if (r > 0) {
        EXPECT_NE(loss, t.result.outputs[s][0].at("loss").f[0]);  // their own data
      }
    }
  }
  expect_same_variables(both);
}

// CrossShardOptimizer on the 8 cores: the gradients' cross_replica_sum is an all-reduce over the
// interconnect, every replica starts each step with bitwise the same weights, and they follow
// the cpu backend's replicas (mxu precision), whichever algorithm moves the gradients (the ones
// other than the ring add in other orders: the same sums up to rounding).
class CrossShardTraining : public ::testing::TestWithParam<AllReduceAlgorithm> {};

TEST_P(CrossShardTraining, KeepsEveryCoreInStep) {
  const BothBackends both = run_on_both(training_step(/*cross_shard=*/true), GetParam());
  const Loop& t = both.tpu;
  const Loop& c = both.cpu;
  for (size_t s = 1; s < 3; ++s) {
    for (const auto& [name, value] : t.result.outputs[s][0]) {
      if (name == "loss") continue;
      for (size_t r = 1; r < kReplicas; ++r)
        ASSERT_EQ(t.result.outputs[s][r].at(name).f, value.f) << name << " replica " << r;
    }
  }
  expect_same_variables(both);
  for (size_t r = 0; r < kReplicas; ++r) {
    EXPECT_NEAR(t.result.outputs[2][r].at("loss").f[0], c.result.outputs[2][r].at("loss").f[0],
                1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(InfeedSystem, CrossShardTraining,
                         ::testing::Values(AllReduceAlgorithm::kRing,
                                           AllReduceAlgorithm::kBidirRing,
                                           AllReduceAlgorithm::kTorus2d,
                                           AllReduceAlgorithm::kTorus));

// The torus algorithms run over every core of the slice, so they need a replica on each; an
// algorithm the interconnect does not have is not one of the words the CLI parses, which it names.
TEST(InfeedSystem, AllReduceAlgorithmsTheStepCannotUseAreRefused) {
  auto tpu = make_backend("tpusim");
  auto exe = (*tpu)->compile(training_step(), {Precision::kFp32, 4, AllReduceAlgorithm::kTorus});
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(std::string(exe.status().message()),
              ::testing::HasSubstr("allreduce 'torus' runs over every core of v3-8 (8), but the "
                                   "step has 4 replica(s): use ring or bidir_ring"));
  EXPECT_EQ(kAllReduceAlgorithms.parse("tree"), std::nullopt);
  EXPECT_EQ(kAllReduceAlgorithms.list(), "ring, bidir_ring, torus2d or torus");
}

// With the same inputs the interconnect's sum and the cpu backend's are bitwise equal: both add
// in the ring order of replicas 0 .. 7.
TEST(InfeedSystem, CrossReplicaSumIsBitwiseTheCpuBackends) {
  GraphBuilder b;
  b.output("s", b.cross_replica_sum(b.infeed("x", DType::kF32, {1000, 3})));
  LoopStep step;
  for (uint32_t r = 0; r < kReplicas; ++r) {
    const data::FeatureValue v = floats({1000, 3}, 100 + r);
    step.replicas.push_back({{"x", HostTensor::from({1000, 3}, v.floats)}});
  }
  std::vector<std::vector<float>> sums;
  for (const char* name : {"tpusim", "cpu"}) {
    auto backend = make_backend(name);
    auto exe = (*backend)->compile(b.graph(), {Precision::kFp32, kReplicas});
    ASSERT_TRUE(exe.ok()) << exe.status();
    Variables none;
    auto out = (*backend)->run_loop(**exe, none, {step}, 0);
    ASSERT_TRUE(out.ok()) << out.status();
    for (uint32_t r = 0; r < kReplicas; ++r) sums.push_back(out->outputs[0][r].at("s").f);
  }
  for (size_t i = 1; i < sums.size(); ++i) EXPECT_EQ(sums[i], sums[0]) << "result " << i;
}

// A bf16 infeed: the infeed driver rounds the host's f32 values to bf16 (the host's cast), the
// host link carries 2 bytes an element instead of 4, and the device widens them to f32 as they
// land, so tpusim computes on exactly the cpu backend's values. The first step waits for its
// batch to cross the link, less by the time of the bytes saved. A matmul on the MXU rounds its
// f32 input to bf16 anyway (DEFAULT precision), so its products are the same either way.
TEST(InfeedSystem, ABf16InfeedCrossesTheLinkInHalfTheBytesWithTheSameValues) {
  auto sums_of = [](DType dtype) {
    GraphBuilder b;
    const Value x = b.infeed("x", dtype, {kRowsPerCore, 256});
    const Value wide = dtype == DType::kF32 ? x : b.cast(x, DType::kF32);
    b.output("s", wide * 2.0f + 1.0f);
    b.output("p",
             b.matmul(wide, b.constant(HostTensor::from({256, 8}, floats({256, 8}, 9).floats))));
    return b.graph();
  };
  std::map<std::string, Loop> loops;
  for (const char* name : {"tpusim", "cpu"}) {
    auto backend = make_backend(name);
    ASSERT_TRUE(backend.ok()) << backend.status();
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const Graph g = sums_of(dtype);
      auto exe = (*backend)->compile(g, {Precision::kFp32, kReplicas});
      ASSERT_TRUE(exe.ok()) << exe.status();
      Variables none;
      loops[str_cat(name, " ", dtype_name(dtype))] = run_fed(**backend, **exe, none, 1, 0);
    }
  }
  auto sums = [&](const std::string& run, const char* output = "s") {
    std::vector<float> all;
    for (const auto& replica : loops.at(run).result.outputs[0]) {
      const auto& s = replica.at(output).f;
      all.insert(all.end(), s.begin(), s.end());
    }
    return all;
  };
  EXPECT_EQ(sums("tpusim bf16"), sums("cpu bf16"));
  EXPECT_EQ(sums("tpusim f32"), sums("cpu f32"));
  EXPECT_NE(sums("tpusim bf16"), sums("tpusim f32"));  // the host did round
  EXPECT_EQ(sums("tpusim bf16", "p"), sums("tpusim f32", "p"));
  const uint64_t f32_wait = loops.at("tpusim f32").max_wait;
  const uint64_t bf16_wait = loops.at("tpusim bf16").max_wait;
  // Each chip's link carries its two cores' batches: 2 x 32 x 256 elements, 32 KiB fewer in bf16,
  // which at the v3's 16 GB/s host link is 1,925 cycles of 940 MHz.
  EXPECT_EQ(f32_wait, 5732u);
  EXPECT_EQ(bf16_wait, 3806u);
  EXPECT_NEAR(static_cast<double>(f32_wait - bf16_wait), 32768 / 16e9 * kHz, 2.0);

  // A caller feeding unrounded f32 batches to a bf16 infeed directly, without the driver: every
  // backend rounds them as the host link does (infeed_value), so tpusim and cpu still agree.
  LoopStep raw;
  for (uint32_t r = 0; r < kReplicas; ++r) {
    raw.replicas.push_back(
        {{"x", HostTensor::from({kRowsPerCore, 256}, floats({kRowsPerCore, 256}, 50 + r).floats)}});
  }
  std::vector<std::vector<float>> direct;
  for (const char* name : {"tpusim", "cpu"}) {
    auto backend = make_backend(name);
    auto exe = (*backend)->compile(sums_of(DType::kBF16), {Precision::kFp32, kReplicas});
    ASSERT_TRUE(exe.ok()) << exe.status();
    Variables none;
    auto out = (*backend)->run_loop(**exe, none, {raw}, 0);
    ASSERT_TRUE(out.ok()) << out.status();
    direct.push_back(out->outputs[0][3].at("s").f);
  }
  EXPECT_EQ(direct[0], direct[1]);
  EXPECT_EQ(direct[1][0], sim::round_to_bf16(raw.replicas[3].at("x").f[0]) * 2.0f + 1.0f);
}

// Overlapped (the default), each gradient's all-reduce runs while the backward pass computes the
// earlier layers' gradients, and only the update that reads its sum waits for it. The values are
// bitwise those of the serial schedule; the step is shorter, by at most the time the serial
// schedule spends in its all-reduces (nothing else runs then).
TEST(InfeedSystem, AnOverlappedAllReduceChangesTheStepTimeNotTheValues) {
  const Graph g = training_step(/*cross_shard=*/true);
  auto tpu = make_backend("tpusim");
  ASSERT_TRUE(tpu.ok()) << tpu.status();
  std::map<bool, Loop> loops;
  std::map<bool, Variables> after;
  for (bool overlap : {true, false}) {
    auto exe =
        (*tpu)->compile(g, {Precision::kFp32, kReplicas, AllReduceAlgorithm::kRing, overlap});
    ASSERT_TRUE(exe.ok()) << exe.status();
    after[overlap] = initial_variables(g);
    loops[overlap] = run_fed(**tpu, **exe, after[overlap], 3, 0);
  }
  const Loop& on = loops[true];
  const Loop& off = loops[false];
  ASSERT_EQ(on.result.outputs.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    for (size_t r = 0; r < kReplicas; ++r) {
      for (const auto& [name, value] : off.result.outputs[s][r])
        EXPECT_EQ(on.result.outputs[s][r].at(name).f, value.f) << name << " step " << s;
    }
  }
  for (const auto& [name, value] : after[false]) EXPECT_EQ(after[true].at(name).f, value.f) << name;
  double serial_collective_seconds = 0;
  for (const OpTiming& op : off.result.timing.ops) {
    if (op.op == "cross_replica_sum") serial_collective_seconds += op.seconds;
  }
  const auto serial_collective_cycles = static_cast<uint64_t>(serial_collective_seconds * kHz);
  EXPECT_GT(serial_collective_cycles, 0u);
  EXPECT_LT(on.result.timing.cycles, off.result.timing.cycles);
  EXPECT_GE(on.result.timing.cycles + serial_collective_cycles, off.result.timing.cycles);
  // Three steps. Serially the all-reduces take about half of them (81,617 cycles a step); the
  // first layer's gradients are the last computed, so the sum of its weights (256 x 512, 512 KiB
  // of the 770 KiB summed) has almost nothing to hide behind: the overlap saves 8,331 cycles a
  // step. (The all-reduces' time is chip 0's: the union of its two cores' spans.)
  EXPECT_EQ(on.result.timing.cycles, 438019u);
  EXPECT_EQ(off.result.timing.cycles, 463013u);
  EXPECT_EQ(serial_collective_cycles, 244850u);
}

TEST(InfeedSystem, ReplicasBeyondTheCoresAreRefused) {
  auto tpu = make_backend("tpusim");
  auto exe = (*tpu)->compile(training_step(), {Precision::kFp32, 9});
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(std::string(exe.status().message()),
              ::testing::HasSubstr("9 replicas on v3-8, which has 8 cores (one replica per core)"));
}

// The device's step time is measured with every batch ready at once; then the host makes a
// batch every 0.2 steps (compute-bound) or every 3 steps (input-bound).
TEST(InfeedSystem, TheDeviceWaitsOnlyWhereTheHostIsSlower) {
  Measured m = measure_step();
  ASSERT_NE(m.exe, nullptr);
  const Loop& one = m.one;
  const Loop& ten = m.ten;
  const double hz = kHz;
  Backend& tpu = *m.tpu;
  Executable& exe = *m.exe;
  Variables& vars = m.vars;
  // Ready at once, the first step waits only for the first batch to cross the link, and no
  // later step waits.
  EXPECT_EQ(ten.max_wait, one.max_wait);
  EXPECT_EQ(one.result.timing.cycles, 37767u);
  EXPECT_EQ(ten.result.timing.cycles, 300009u);
  EXPECT_EQ(one.max_wait, 9030u);
  const double step_seconds = m.step_seconds;

  // Compute-bound: a new batch every 0.2 steps. After the first batch the device never waits.
  const Loop fast = run_fed(tpu, exe, vars, 10, 0.2 * step_seconds);
  const uint64_t first_batch = static_cast<uint64_t>(0.2 * step_seconds * hz);
  for (uint64_t w : fast.result.timing.infeed_wait_cycles) {
    EXPECT_GE(w, first_batch);
    EXPECT_LE(w, first_batch + one.max_wait + 1);
  }
  EXPECT_EQ(fast.result.timing.cycles, ten.result.timing.cycles + fast.max_wait - ten.max_wait);

  // Input-bound: a batch every 3 steps. Every step but the first waits about 2 steps' time, and
  // the loop takes as long as the host needs for ten batches plus one step.
  const Loop slow = run_fed(tpu, exe, vars, 10, 3 * step_seconds);
  const double host_seconds = 10 * 3 * step_seconds;
  const double device_seconds = slow.result.timing.seconds;
  EXPECT_GT(device_seconds, host_seconds);
  EXPECT_LT(device_seconds, host_seconds + 1.5 * step_seconds);
  for (uint64_t w : slow.result.timing.infeed_wait_cycles) {
    const double wait = static_cast<double>(w) / hz;
    EXPECT_GT(wait, 3 * step_seconds + 9 * 2 * step_seconds * 0.95);
    EXPECT_LT(wait / device_seconds, 0.75);
    EXPECT_GT(wait / device_seconds, 0.6);  // highly input-bound
  }
  EXPECT_EQ(slow.result.timing.cycles, 911907u);
  EXPECT_EQ(slow.max_wait, 624537u);
}

// Between two loops the host's round trip leaves the device idle for 30 steps' time, in which a
// host making a batch every 2 steps could make 15. Its buffers hold 3: the prefetch buffer's 2
// and the batch its one stage finished and holds until there is room. So the second loop takes
// those 3 at once, and then one batch every 2 steps: about 3 + 2 x 6 steps, where a prefetch
// buffer of 100 lets the host bank all it can make and the loop takes 10 steps.
TEST(InfeedSystem, BetweenLoopsTheHostBanksOnlyWhatItsBuffersHold) {
  Measured m = measure_step();
  ASSERT_NE(m.exe, nullptr);
  const double step = m.step_seconds;
  const double hz = kHz;
  Backend& tpu = *m.tpu;
  Executable& exe = *m.exe;
  const Graph& g = exe.graph();
  Variables& vars = m.vars;

  auto driver = fed_by(g, 20, 2 * step);
  const Loop first = run_loop(tpu, exe, vars, *driver, 10);
  ASSERT_TRUE(tpu.host_round_trip(30 * step).ok());
  const Loop second = run_loop(tpu, exe, vars, *driver, 10);
  auto roomy = fed_by(g, 20, 2 * step, 100);
  const Loop roomy_first = run_loop(tpu, exe, vars, *roomy, 10);
  ASSERT_TRUE(tpu.host_round_trip(30 * step).ok());
  const Loop roomy_second = run_loop(tpu, exe, vars, *roomy, 10);
  // Input-bound throughout the first loop: batch k is ready at 2(k+1) steps.
  EXPECT_GT(first.result.timing.seconds, 20 * step);
  EXPECT_LT(first.result.timing.seconds, 21.5 * step);
  // The second: batches 10 and 11 wait in the prefetch buffer, 12 in the stage; 13 starts when
  // 12 leaves, at the loop's start, and the last, 19, is ready 14 steps in.
  EXPECT_GT(second.result.timing.seconds, 14 * step);
  EXPECT_LT(second.result.timing.seconds, 15.5 * step);
  EXPECT_GT(static_cast<double>(second.max_wait) / hz, 4 * step);
  EXPECT_EQ(first.result.timing.cycles, 620527u);
  EXPECT_EQ(second.result.timing.cycles, 445699u);  // 14.9 steps
  EXPECT_EQ(second.max_wait, 157027u);
  // With room for every batch, only the first of the second loop waits (to cross the link).
  EXPECT_EQ(roomy_first.result.timing.cycles, first.result.timing.cycles);
  EXPECT_EQ(roomy_second.max_wait, m.one.max_wait);
  EXPECT_EQ(roomy_second.result.timing.cycles, m.ten.result.timing.cycles);  // 380423
  // The host alone, as if the device took every batch at once, makes the 20 in 40 steps' time.
  const HostPipelineModel& host = driver->host_models()[0];
  EXPECT_NEAR(host.with_threads(0, 1).last_ready_seconds(), 40 * step, 1e-12);
}

}  // namespace infeed_system_test
}  // namespace tpusim::runtime
