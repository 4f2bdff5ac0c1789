// System::create holds a slice's SystemC thread stacks against the address space before it
// builds anything, from the count SliceModel::thread_processes plans. The plan must be the
// count the kernel then elaborates, or the check guards the wrong figure.
#include "sim/process_stacks.h"

#include <gtest/gtest.h>

#include "sim/slice_model.h"
#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace {

// v2-32: 16 chips of two cores each, fed by 4 hosts; v2 has one MXU and four DMA engines a core.
TEST(ProcessStacks, TheSlicesPlannedThreadsAreTheElaboratedOnes) {
  auto spec = config::load_slice("v2-32");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto slice = std::make_shared<config::SliceSpec>(**spec);
  const uint64_t planned = SliceModel::thread_processes(*slice);
  // 16 chips x (2 cores x (4 DMA + 1 MXU + 4 units + sequencer) + 2 host-link threads), an
  // infeed thread for each of the 4 hosts, the collective engine.
  EXPECT_EQ(planned, 16u * (2u * 10u + 2u) + 4u + 1u);
  auto system = System::create(slice, {});
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_EQ(elaborated_thread_processes(), planned);
}

}  // namespace
}  // namespace tpusim::sim
