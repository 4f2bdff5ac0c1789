// Replica folding in the simulator (isa CoreProgram.shadow): a shadow core runs only its
// collectives and joins each when the simulated members reach it, and its chip's HBM takes the
// DMA requests of the core it stands for, so a folded program takes the cycles of the full one.
#include <gtest/gtest.h>

#include "tests/sim/collective_util.h"
#include "tests/sim/sim_test_util.h"
#include "traces/recording_sink.h"

namespace tpusim::sim {
namespace replica_folding_test {

using C = isa::Collective;
using testing::base_of;

constexpr uint64_t kElements = 1 << 20;  // 4 MiB summed per core
constexpr uint64_t kSrc = 64ull << 20;   // above the DMAs' source
constexpr uint64_t kDst = 96ull << 20;

// Two steps of: `core` copies 16 MiB of its HBM share to VMEM (its chip's HBM busy), then every
// core all-reduces 4 MiB (ring) while a further 16 MiB of copies run beside it. A shadow keeps
// only the all-reduce and stands for `stands_for`.
void add_core(System& s, isa::Program* p, uint32_t core, bool shadow, uint32_t stands_for) {
  CoreBuilder b(p, core);
  const uint64_t base = base_of(s, core);
  const uint64_t rows = 1024, cols = 1024;  // 4 MiB a copy
  b.loop(2, [&] {
    for (uint64_t i = 0; i < 4 && !shadow; ++i)
      b.dma_to_vmem(block(base + i * rows * cols * 4, rows, cols, isa::F32),
                    block(0, rows, cols, isa::F32), static_cast<uint32_t>(i));
    b.collective(C::ALL_REDUCE, C::RING, base + kSrc, base + kDst, kElements);
    for (uint64_t i = 0; i < 4 && !shadow; ++i)
      b.dma_to_vmem(block(base + i * rows * cols * 4, rows, cols, isa::F32),
                    block(0, rows, cols, isa::F32), static_cast<uint32_t>(i));
  });
  b.halt();
  p->mutable_cores(p->cores_size() - 1)->set_shadow(shadow);
  p->mutable_cores(p->cores_size() - 1)->set_stands_for(stands_for);
}

// The program with cores `simulated` .. 7 folded onto cores 0 .. simulated-1.
isa::Program program(System& s, uint32_t simulated) {
  isa::Program p;
  for (uint32_t core = 0; core < s.slice().cores; ++core)
    add_core(s, &p, core, core >= simulated, core % simulated);
  return p;
}

TEST(ReplicaFolding, ShadowsTakeTheCyclesOfTheReplicasTheyStandFor) {
  traces::RecordingSink sink;
  auto s = testing::make_system("v3-8", {MxuPolicy::kTpu, /*timing_only=*/true, &sink});
  auto full = s->run(program(*s, 8));
  ASSERT_TRUE(full.ok()) << full.status();
  const double full_chip3_bytes = s->stats().value("chip3.hbm.bytes");
  const uint64_t full_steps = sink.slices_on(3, 1, "steps").size();
  const uint64_t full_ici = sink.slices_on(3, 1, "ici").size();
  // Chip 0's two cores simulated, the other three chips' six cores folded onto them.
  auto folded = s->run(program(*s, 2));
  ASSERT_TRUE(folded.ok()) << folded.status();
  // Every core ends on the cycle it ended on unfolded: the shadows reach each all-reduce when
  // chip 0's cores do, and their chips' HBM is as busy as chip 0's.
  ASSERT_EQ(folded->cores.size(), full->cores.size());
  for (size_t c = 0; c < full->cores.size(); ++c) {
    EXPECT_EQ(folded->cores[c].cycles, full->cores[c].cycles) << "core " << c;
    EXPECT_EQ(folded->cores[c].shadow, c >= 2) << "core " << c;
  }
  EXPECT_EQ(folded->cycles(), 268323u);
  EXPECT_EQ(s->stats().value("chip3.hbm.bytes"), full_chip3_bytes);
  // Only simulated cores trace steps and spans: chip 3's core 1 did unfolded, and does not
  // folded.
  EXPECT_EQ(full_steps, 2u);
  EXPECT_EQ(full_ici, 2u);
  EXPECT_EQ(sink.slices_on(3, 1, "steps").size(), 2u);
  EXPECT_EQ(sink.slices_on(3, 1, "ici").size(), 2u);
  EXPECT_EQ(sink.slices_on(0, 1, "steps").size(), 4u);
}

}  // namespace replica_folding_test
}  // namespace tpusim::sim
