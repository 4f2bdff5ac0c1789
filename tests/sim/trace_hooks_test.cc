// Every instruction reaches the trace sink as a span on its unit's track, in picoseconds.
#include <map>

#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"
#include "traces/recording_sink.h"

namespace tpusim::sim {
namespace trace_hooks_test {

TEST(TraceHooks, EveryInstructionIsASpanOnItsUnitsTrack) {
  traces::RecordingSink sink;
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, true, &sink});
  // Tracks are declared once, at build time: per core 4 DMA engines, 2 MXUs, vpu, infeed, outfeed
  // and ici (collectives), the sequencer's steps, the core's busy runs, and counters of the infeed
  // queue's depth and the HBM bandwidth the DMA engines draw; per chip its host link's
  // transfers; and per link of the interconnect a utilisation counter: on the 2x2 torus 4 chips x
  // 2 dimensions x 2 directions, and 4 links between the 2 cores of each chip.
  size_t links = 0, host_links = 0;
  for (const auto& t : sink.tracks()) {
    links += t.name.rfind("ici_link_utilization ", 0) == 0;
    host_links += t.name == "host_link" && t.core == -1;
  }
  EXPECT_EQ(links, 16u + 16u);
  EXPECT_EQ(host_links, 4u);
  EXPECT_EQ(sink.tracks().size(), 8u * 14u + 4u + links);
  isa::Program p;
  CoreBuilder c(&p, 3);
  const uint32_t f = c.new_flag();
  c.load_weights(1, 0, block(0x100000, 128, 128, isa::BF16));
  c.matmul(1, 0, block(0, 256, 128, isa::BF16), block(0x200000, 256, 128, isa::F32), false)
      .signal(f);
  c.fill(block(0x300000, 8, 128, isa::F32), 0).wait(f, 1);
  c.halt();
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();

  // Core 3 is core 1 of chip 1.
  const auto mxu = sink.slices_on(1, 1, "mxu1");
  ASSERT_EQ(mxu.size(), 2u);
  const ClockDomain& clock = system->clock();
  // load_weights 0..128, matmul streams 128..384 (its results are out at 638).
  EXPECT_EQ(mxu[0].name, "mxu.load_weights");
  EXPECT_EQ(mxu[0].start, clock.time_of(Cycles(0)));
  EXPECT_EQ(mxu[0].end, clock.time_of(Cycles(128)));
  EXPECT_EQ(mxu[1].name, "mxu.matmul");
  EXPECT_EQ(mxu[1].start, clock.time_of(Cycles(128)));
  EXPECT_EQ(mxu[1].end, clock.time_of(Cycles(384)));
  // The fill waits for the matmul's results: one vreg from 638 to 639.
  const auto vpu = sink.slices_on(1, 1, "vpu");
  ASSERT_EQ(vpu.size(), 1u);
  EXPECT_EQ(vpu[0].name, "vpu.fill");
  EXPECT_EQ(vpu[0].start, clock.time_of(Cycles(638)));
  EXPECT_EQ(vpu[0].end, clock.time_of(Cycles(639)));
  // The core had work in progress from the load's start until the fill's result landed, 8
  // cycles (the vector pipeline) after it issued: one busy run, 0 .. 647.
  const auto busy = sink.slices_on(1, 1, "busy");
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].start, clock.time_of(Cycles(0)));
  EXPECT_EQ(busy[0].end, clock.time_of(Cycles(647)));
  // Nothing else ran anywhere.
  EXPECT_EQ(sink.slices().size(), 4u);
}

// Every instruction carries the graph op it belongs to; the run's report has each op's FLOPs,
// HBM bytes and span. The same program as above, as three ops plus a DMA of its own.
TEST(TraceHooks, ReportProfilesEveryOpFromItsInstructions) {
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  isa::Program p;
  CoreBuilder c(&p, 0);
  const uint32_t f = c.new_flag();
  c.set_origin("dense/matmul", "matmul");
  c.load_weights(1, 0, block(0x100000, 128, 128, isa::BF16));
  c.matmul(1, 0, block(0, 256, 128, isa::BF16), block(0x200000, 256, 128, isa::F32), false)
      .signal(f);
  c.set_origin("relu", "relu");
  c.unary(isa::Vector::RELU, block(0x300000, 8, 128, isa::F32), block(0x200000, 8, 128, isa::F32))
      .wait(f, 1);
  c.set_origin("load", "copy");
  c.dma_to_vmem(block(0, 16, 1024, isa::F32), block(0x400000, 16, 1024, isa::F32));
  c.set_origin("", "");
  c.halt();
  ASSERT_EQ(p.cores(0).origins_size(), 3);
  EXPECT_EQ(p.cores(0).instructions(0).origin(), 1u);
  EXPECT_EQ(p.cores(0).instructions(2).origin(), 2u);
  EXPECT_EQ(p.cores(0).instructions(4).origin(), 0u);  // the halt
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  const RunReport report = system->report(*run);
  const std::vector<OpFigures>& ops = report.cores.at(0).ops;
  ASSERT_EQ(ops.size(), 3u);
  // load_weights 0..128, the matmul streams 128..384 and its results are out at 638.
  EXPECT_EQ(ops[0].label, "dense/matmul");
  EXPECT_EQ(ops[0].op, "matmul");
  EXPECT_EQ(ops[0].flops, 2.0 * 256 * 128 * 128);
  EXPECT_EQ(ops[0].mxu_flops, 2.0 * 256 * 128 * 128);
  EXPECT_EQ(ops[0].hbm_bytes, 0);
  EXPECT_EQ(ops[0].cycles, 638u);
  EXPECT_EQ(ops[0].instructions, 2u);
  // The relu: one vreg from 638 to 639, its result 8 cycles later (the vector latency).
  EXPECT_EQ(ops[1].flops, 8.0 * 128);
  EXPECT_EQ(ops[1].mxu_flops, 0);  // the vector unit's
  EXPECT_EQ(ops[1].cycles, 1u + 8u);
  // The DMA: every byte from HBM, no FLOPs.
  EXPECT_EQ(ops[2].hbm_bytes, 16.0 * 1024 * 4);
  EXPECT_EQ(ops[2].flops, 0);
  EXPECT_GT(ops[2].cycles, 0u);
  // Core 1 ran nothing: no ops.
  EXPECT_TRUE(report.cores.size() == 1 || report.cores[1].ops.empty());
}

TEST(TraceHooks, StatsTreeHasUnitsAndDescriptions) {
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  isa::Program p;
  CoreBuilder c(&p, 0);
  c.dma_to_vmem(block(0, 64, 1024, isa::F32), block(0, 64, 1024, isa::F32));
  c.halt();
  ASSERT_TRUE(system->run(p).ok());
  const auto described = system->stats().to_json(true);
  const auto& dma = described["chip0"]["core0"]["dma0"];
  EXPECT_EQ(dma["bytes"]["value"].get<double>(), 64.0 * 1024 * 4);
  EXPECT_EQ(dma["bytes"]["unit"], "bytes");
  EXPECT_FALSE(dma["busy_cycles"]["description"].get<std::string>().empty());
  EXPECT_EQ(system->stats().value("chip0.hbm.bytes"), 64.0 * 1024 * 4);
  EXPECT_EQ(system->stats().value("chip0.core0.vmem.high_water_bytes"), 64.0 * 1024 * 4);
}

}  // namespace trace_hooks_test
}  // namespace tpusim::sim

namespace tpusim::sim {
namespace trace_hooks_test {

// The profiler's events: one "step N" slice per device-loop iteration on the core's steps
// track, back to back; an infeed.wait slice where the infeed unit waited for the host; the
// infeed queue's depth at every change; the HBM bandwidth the DMA engines draw, back to 0 after.
TEST(TraceHooks, StepsFeedWaitsAndCountersForTheProfiler) {
  traces::RecordingSink sink;
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, false, &sink});
  isa::Program p;
  CoreBuilder c(&p, 1);
  const uint32_t in = c.new_flag();
  const isa::Block vmem = block(0x0, 8, 128, isa::F32);
  c.loop(2, [&] {
    c.infeed(vmem).signal(in);
    c.dma_to_hbm(vmem, block(0x100000, 8, 128, isa::F32)).wait(in, 1);
  });
  c.halt();
  p.set_step_base(7);
  for (uint64_t ready : {0ull, 20000ull}) {
    FeedEntry e;
    e.bytes = 4096;
    e.data.assign(4096, 0);
    ASSERT_TRUE(system->send_infeed(CoreId{1}, std::move(e), ready).ok());
  }
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  const ClockDomain& clock = system->clock();

  const auto steps = sink.slices_on(0, 1, "steps");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].name, "step 8");  // the global steps they complete: step base 7, plus 1
  EXPECT_EQ(steps[1].name, "step 9");
  EXPECT_EQ(steps[0].start, clock.time_of(Cycles(run->start_cycle)));
  EXPECT_EQ(steps[1].start, steps[0].end);
  // Each dequeue waited for its batch: the first for the link transfer (1181 cycles, see
  // feeds_test), the second until 20000 + 1181.
  std::vector<traces::RecordingSink::Slice> waits;
  for (const auto& s : sink.slices_on(0, 1, "infeed")) {
    if (s.name == "infeed.wait") waits.push_back(s);
  }
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0].end, clock.time_of(Cycles(1181)));
  EXPECT_EQ(waits[1].end, clock.time_of(Cycles(21181)));
  EXPECT_GE(waits[1].start, steps[1].start);

  std::map<std::string, std::vector<double>> counters;
  for (const auto& s : sink.samples()) {
    const auto& t = sink.track(s.track);
    if (t.chip == 0 && t.core == 1) counters[t.name].push_back(s.value);
  }
  // Depth: each batch lands (1) and is taken (0).
  EXPECT_EQ(counters["infeed_queue_depth"], (std::vector<double>{1, 0, 1, 0}));
  // Two DMAs that never overlap: up at the start of each, back to 0 at its end.
  const auto& hbm = counters["hbm_bandwidth"];
  ASSERT_EQ(hbm.size(), 4u);  // the last drop when the run ends
  EXPECT_GT(hbm[0], 1e9);
  EXPECT_EQ(hbm[1], 0);
  EXPECT_EQ(hbm[2], hbm[0]);
  EXPECT_EQ(hbm[3], 0);

  // Between runs the slice can idle (the host's round trip): time passes, nothing happens.
  const uint64_t before = system->now_cycle();
  ASSERT_TRUE(system->idle(1000).ok());
  EXPECT_EQ(system->now_cycle(), before + 1000);
}

}  // namespace trace_hooks_test
}  // namespace tpusim::sim

namespace tpusim::sim {
namespace trace_hooks_test {

// Each link's utilisation counter: up while the link moves a collective's chunks, never above
// 1, back to 0 at the end; its integral times the link's bandwidth is the bytes it moved.
TEST(TraceHooks, LinkUtilisationCountersAccountForEveryByteOnTheLinks) {
  traces::RecordingSink sink;
  auto system = testing::make_system("v3-8", {MxuPolicy::kTpu, true, &sink});
  const uint64_t n = 1 << 20;
  const uint64_t per_core_hbm = system->slice().chip.hbm.capacity_bytes / 2;
  isa::Program p;
  for (uint32_t core : {0u, 2u}) {  // core 0 of chips 0 and 1: one hop over +x and back
    CoreBuilder b(&p, core);
    auto* c = b.collective(isa::Collective::ALL_REDUCE, isa::Collective::RING, 0x1000,
                           per_core_hbm / 2, n)
                  .instruction()
                  .mutable_collective();
    c->add_group(0);
    c->add_group(2);
    b.halt();
  }
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  std::map<std::string, std::vector<traces::RecordingSink::Sample>> by_link;
  for (const auto& sample : sink.samples()) {
    const auto& t = sink.track(sample.track);
    if (t.name.rfind("ici_link_utilization ", 0) == 0)
      by_link["chip " + std::to_string(t.chip) + " " + t.name].push_back(sample);
  }
  ASSERT_FALSE(by_link.empty());
  double link_seconds = 0;  // the integral of utilisation over time, over every link
  for (const auto& [name, samples] : by_link) {
    EXPECT_EQ(name.find("core"), std::string::npos) << name;  // chip links only
    EXPECT_EQ(samples.back().value, 0) << name;
    for (size_t i = 0; i + 1 < samples.size(); ++i) {
      EXPECT_GE(samples[i].value, 0) << name;
      EXPECT_LE(samples[i].value, 1.0) << name;
      EXPECT_LE(samples[i].time, samples[i + 1].time) << name;
      link_seconds +=
          samples[i].value * static_cast<double>(samples[i + 1].time - samples[i].time) * 1e-12;
    }
  }
  const double bytes = system->stats().value("interconnect.bytes");
  EXPECT_GT(bytes, 4.0 * n);  // 2 members each send their half and get the other's, x2 phases
  EXPECT_NEAR(link_seconds * system->slice().chip.ici.link_bandwidth_bytes_per_s, bytes,
              bytes * 1e-4);
  // The members' HBM bandwidth tracks carry the collective's reads and writes, in time order.
  double hbm_bytes = 0;
  for (uint32_t chip : {0u, 1u}) {
    std::vector<traces::RecordingSink::Sample> hbm;
    for (const auto& sample : sink.samples()) {
      const auto& t = sink.track(sample.track);
      if (t.chip == static_cast<int>(chip) && t.core == 0 && t.name == "hbm_bandwidth")
        hbm.push_back(sample);
    }
    ASSERT_GT(hbm.size(), 2u) << chip;
    EXPECT_EQ(hbm.back().value, 0) << chip;
    for (size_t i = 0; i + 1 < hbm.size(); ++i) {
      EXPECT_LE(hbm[i].time, hbm[i + 1].time) << chip << " sample " << i;
      hbm_bytes += hbm[i].value * static_cast<double>(hbm[i + 1].time - hbm[i].time) * 1e-12;
    }
  }
  const double moved = system->stats().value("interconnect.hbm_bytes");
  EXPECT_EQ(moved, 2 * 2 * 4.0 * n);  // each member reads and writes its n floats once
  EXPECT_NEAR(hbm_bytes, moved, moved * 1e-3);
}

}  // namespace trace_hooks_test
}  // namespace tpusim::sim
