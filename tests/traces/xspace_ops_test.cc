// The ops of an XProf profile (traces/xspace_ops.h) and two profiles compared op by op
// (traces/profile_compare.h): self times with nested executions taken out, executions outside
// the steps left out, the slowest device's step, a host-only profile's StepTraceAnnotation steps
// and hlo_op executions (JAX on the CPU writes them so), errors naming where, and the comparison's
// matching, categories, totals and ratios.
#include "traces/xspace_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "traces/profile_compare.h"
#include "traces/xplane_builder.h"
#include "traces/xprof_profile.h"
#include "traces/xspace_reader.h"

namespace tpusim::traces {
namespace xspace_ops_test {

using ::testing::HasSubstr;

struct OpFigures {
  std::string name, category;
  int64_t executions;
  uint64_t self_ps;
  bool operator==(const OpFigures& o) const {
    return name == o.name && category == o.category && executions == o.executions &&
           self_ps == o.self_ps;
  }
};
std::ostream& operator<<(std::ostream& os, const OpFigures& o) {
  return os << o.name << " (" << o.category << ") x" << o.executions << " " << o.self_ps << " ps";
}

std::vector<OpFigures> figures(const OpProfile& p) {
  std::vector<OpFigures> out;
  for (const ProfileOp& op : p.ops)
    out.push_back({op.name, op.category, op.executions, op.self_ps});
  return out;
}

// Two cores: core 0 as xprof_profile_test's (the bias nested in the matmul), core 1 a slower step
// with one matmul in it and a relu after its step.
XprofProfile two_cores() {
  XprofProfile p;
  p.device_type = "TPU v3";
  p.peak_teraflops_per_second = 61.5;
  p.peak_hbm_gigabytes_per_second = 450;
  p.ops = {{"x", "infeed", 0, 64},
           {"dense/matmul", "matmul", 1000, 100},
           {"relu", "fused", 10, 50},
           {"bias", "fused", 5, 10}};
  XprofCore c0;
  c0.ordinal = 0;
  c0.steps[1] = {0, 1000};
  c0.ops = {{0, 1, {40, 50}}, {1, 1, {60, 200}}, {2, 1, {150, 300}}, {3, 1, {70, 90}}};
  c0.infeed_waits = {{10, 40}};
  XprofCore c1;
  c1.ordinal = 1;
  c1.steps[1] = {0, 2000};
  c1.ops = {{1, 1, {100, 600}}, {2, 2, {3000, 3100}}};
  p.cores = {c0, c1};
  return p;
}

TEST(OpProfile, SelfTimesWithinStepsFromATpuProfile) {
  auto read = op_profile_of(to_xspace(two_cores()), "two.xplane.pb");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->device, "TPU v3");
  EXPECT_EQ(read->devices, 2);
  EXPECT_EQ(read->steps, 1);
  EXPECT_EQ(read->step_ps, 2000);  // the slower core's step
  EXPECT_DOUBLE_EQ(read->peak_teraflops_per_second, 61.5);
  EXPECT_DOUBLE_EQ(read->peak_hbm_gigabytes_per_second, 450);
  // The matmul [60, 150) less the bias [70, 90) inside it, and core 1's 500 ps; the infeed op
  // holds its wait; core 1's relu after its step is not counted.
  EXPECT_THAT(figures(*read),
              ::testing::ElementsAre(OpFigures{"dense/matmul", "convolution", 2, 570},
                                     OpFigures{"relu", "loop fusion", 1, 150},
                                     OpFigures{"x", "infeed", 1, 40},
                                     OpFigures{"bias", "loop fusion", 1, 20}));
  EXPECT_EQ(read->ops[0].flops, 1000);
  EXPECT_EQ(read->ops[0].bytes_accessed, 100);
  EXPECT_DOUBLE_EQ(read->seconds_per_step(read->ops[0]), 285e-12);  // over 1 step x 2 devices
  EXPECT_THAT(read->ops_text(2), HasSubstr("ops (2 of 4, costliest first"));
}

// A host-only profile as JAX's profiler writes one for XLA on the CPU.
struct HostProfile {
  xprof::XSpace space;
  XPlaneBuilder b;
  xprof::XLine* steps;
  xprof::XLine* ops;
  HostProfile() : b(space.add_planes(), 0, "/host:CPU") {
    steps = b.add_line(1, "python");
    ops = b.add_line(2, "tf_XLAPjRtCpuClient");
  }
  void step(int64_t number, uint64_t start, uint64_t end) {
    xprof::XEvent* e = b.add_event(steps, b.event_metadata("train"), start, end);
    b.add_int(e->mutable_stats(), "step_num", number);
  }
  // An op execution whose hlo_op stat refers to the op's name, as XProf's interned strings do.
  xprof::XEvent* op(const std::string& name, uint64_t start, uint64_t end) {
    xprof::XEvent* e = b.add_event(ops, b.event_metadata(name), start, end);
    xprof::XStat* s = e->add_stats();
    s->set_metadata_id(b.stat_id("hlo_op"));
    s->set_ref_value(static_cast<uint64_t>(b.stat_id(name)));
    return e;
  }
};

TEST(OpProfile, StepsAndXlaOpsOfAHostOnlyProfile) {
  HostProfile h;
  h.step(0, 0, 1000);
  h.step(1, 2000, 2500);
  h.op("dot.1", 100, 400);
  h.op("fusion", 150, 250);  // inside the dot: its time is not the dot's
  h.op("dot.1", 2100, 2200);
  h.op("fusion", 1500, 1600);  // between the steps: not counted
  auto read = op_profile_of(h.space, "jax.xplane.pb");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->device, "CPU");
  EXPECT_EQ(read->devices, 1);
  EXPECT_EQ(read->steps, 2);
  EXPECT_EQ(read->step_ps, 750);
  EXPECT_THAT(figures(*read), ::testing::ElementsAre(OpFigures{"dot.1", "", 2, 300},
                                                     OpFigures{"fusion", "", 1, 100}));
}

TEST(OpProfile, WhatIsWrongIsNamed) {
  const auto message = [](const xprof::XSpace& space) {
    return std::string(op_profile_of(space, "bad.xplane.pb").status().message());
  };
  {
    HostProfile h;
    h.step(0, 0, 1000);
    h.op("dot", 10, 20)->mutable_stats(0)->set_ref_value(999);
    EXPECT_THAT(message(h.space), HasSubstr("bad.xplane.pb: plane 0 '/host:CPU', line "
                                            "'tf_XLAPjRtCpuClient': an hlo_op stat that names no "
                                            "op"));
  }
  {
    HostProfile h;
    h.step(0, 0, 1000);
    h.space.mutable_planes(0)->mutable_lines(0)->mutable_events(0)->mutable_stats(0)->set_str_value(
        "seven");
    EXPECT_THAT(message(h.space), HasSubstr("line 'python': a step_num that is no step number"));
  }
  {
    HostProfile h;
    h.op("dot", 10, 20);
    EXPECT_THAT(message(h.space), HasSubstr("bad.xplane.pb: no steps"));
  }
  xprof::XSpace tpu = to_xspace(two_cores());
  tpu.mutable_planes(1)->mutable_lines(2)->mutable_events(0)->set_metadata_id(999);
  EXPECT_THAT(message(tpu), HasSubstr("plane 1 '/device:TPU:1', line 'XLA Ops': an event names "
                                      "metadata 999, which the plane lacks"));
}

// What one run's profile cannot hold is refused by both of its readers (the analyzer's events and
// the op profile): two planes of one name (two profiles merged counted 16 devices of 8), an op's
// execution repeated at the same offset (every op "2.00 runs a step"), a step twice or of no time.
TEST(OpProfile, WhatNoRunCouldWriteIsRefused) {
  auto both = [](const xprof::XSpace& space) {
    const std::string ops(op_profile_of(space, "m.xplane.pb").status().message());
    const std::string events(analysis_events_of(space, "m.xplane.pb").status().message());
    EXPECT_EQ(ops, events);
    return ops;
  };
  const xprof::XSpace good = to_xspace(two_cores());
  ASSERT_TRUE(op_profile_of(good, "m.xplane.pb").ok());
  xprof::XSpace merged = good;
  *merged.add_planes() = good.planes(0);
  EXPECT_EQ(both(merged),
            "m.xplane.pb: plane 3 '/device:TPU:0' repeats plane 0's name: a profile holds one "
            "plane per device and host (two merged?)");
  xprof::XSpace repeated = good;
  xprof::XLine* ops = repeated.mutable_planes(1)->mutable_lines(2);
  *ops->add_events() = ops->events(0);
  EXPECT_EQ(both(repeated),
            "m.xplane.pb: plane 1 '/device:TPU:1', line 'XLA Ops': op 'dense/matmul' runs twice "
            "at the same offset and duration (100 ps): the profile is not one run's");
  xprof::XSpace twice = good;
  xprof::XLine* steps = twice.mutable_planes(0)->mutable_lines(0);
  *steps->add_events() = steps->events(0);
  EXPECT_EQ(both(twice),
            "m.xplane.pb: plane 0 '/device:TPU:0', line 'Steps': step 1 appears twice: the "
            "profile is not one run's");
  xprof::XSpace instant = good;
  instant.mutable_planes(0)->mutable_lines(0)->mutable_events(0)->set_duration_ps(0);
  EXPECT_EQ(both(instant),
            "m.xplane.pb: plane 0 '/device:TPU:0', line 'Steps': step 1 lasts no time");
  xprof::XSpace aggregated = good;
  aggregated.mutable_planes(1)->mutable_lines(2)->mutable_events(0)->set_num_occurrences(3);
  EXPECT_EQ(both(aggregated),
            "m.xplane.pb: plane 1 '/device:TPU:1', line 'XLA Ops': an aggregated event (3 "
            "occurrences, no offset) where a timed one is due");
}

OpProfile profile_of(const std::string& path, double step_ps,
                     const std::vector<std::tuple<std::string, std::string, uint64_t>>& ops) {
  OpProfile p;
  p.path = path;
  p.device = "TPU v3";
  p.devices = 1;
  p.steps = 1;
  p.step_ps = step_ps;
  for (const auto& [name, category, ps] : ops) p.ops.push_back({name, category, 1, ps, 0, 0});
  return p;
}

TEST(ProfileCompare, OpsMatchedByNameAndCategorySummedByCategory) {
  const ProfileComparison c =
      compare_profiles(profile_of("real.xplane.pb", 4e9,
                                  {{"conv", "convolution fusion", 2'000'000'000},
                                   {"add", "loop fusion", 1'000'000'000},
                                   {"mul", "loop fusion", 500'000'000},
                                   {"sum", "loop fusion", 100'000'000}}),
                       profile_of("sim.xplane.pb", 5e9,
                                  {{"conv", "convolution fusion", 3'000'000'000},
                                   {"add", "loop fusion", 1'000'000'000},
                                   {"sum", "reduce", 200'000'000}}));
  EXPECT_DOUBLE_EQ(*c.step_ratio(), 1.25);
  ASSERT_EQ(c.matched.size(), 2u);
  EXPECT_EQ(c.matched[0].name, "conv");
  EXPECT_DOUBLE_EQ(*c.matched[0].ratio(), 1.5);
  EXPECT_EQ(c.matched[1].name, "add");
  // "sum" is a loop fusion measured and a reduce simulated: not the same op.
  ASSERT_EQ(c.only_measured.size(), 2u);
  EXPECT_EQ(c.only_measured[0].name, "mul");
  EXPECT_EQ(c.only_measured[1].name, "sum");
  ASSERT_EQ(c.only_simulated.size(), 1u);
  EXPECT_EQ(c.only_simulated[0].category, "reduce");
  ASSERT_EQ(c.categories.size(), 3u);
  EXPECT_EQ(c.categories[0].name, "convolution fusion");
  EXPECT_EQ(c.categories[1].name, "loop fusion");
  EXPECT_DOUBLE_EQ(c.categories[1].measured, 1.6e-3);
  EXPECT_DOUBLE_EQ(c.categories[1].simulated, 1e-3);
  EXPECT_EQ(c.categories[1].ops_measured, 3);
  EXPECT_EQ(c.categories[1].ops_simulated, 1);
  EXPECT_EQ(c.categories[2].name, "reduce");
  EXPECT_FALSE(c.categories[2].ratio().has_value());  // nothing measured
  EXPECT_DOUBLE_EQ(c.ops_total.measured, 3.6e-3);
  EXPECT_DOUBLE_EQ(c.ops_total.simulated, 4.2e-3);
  const auto j = c.to_json();
  EXPECT_TRUE(j["categories"][2]["ratio"].is_null());
  EXPECT_EQ(j["only_simulated"][0]["name"], "sum");
  const std::string text = c.to_text(1);
  EXPECT_THAT(text, HasSubstr("costliest ops in both (1 of 2, by measured time)"));
  EXPECT_THAT(text, HasSubstr("only in the measured profile: 2 op(s), 0.600 ms a step "
                              "(costliest: mul, sum)"));
}

}  // namespace xspace_ops_test
}  // namespace tpusim::traces
