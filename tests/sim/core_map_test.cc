// The slice's core numbering (sim/core_map.h): chip by chip, a host per chips_per_host chips.
#include "sim/core_map.h"

#include <gtest/gtest.h>

#include "configs/loader.h"

namespace tpusim::sim {
namespace core_map_test {

TEST(CoreMap, NumbersCoresChipByChip) {
  const CoreMap map(/*chips=*/4, /*cores_per_chip=*/2);
  EXPECT_EQ(map.chips(), 4u);
  EXPECT_EQ(map.cores(), 8u);
  EXPECT_EQ(map.cores_per_chip(), 2u);
  // Core 5 is core 1 of chip 2; chip 2's cores are 4 and 5.
  EXPECT_EQ(map.chip_of(CoreId{5}), ChipId{2});
  EXPECT_EQ(map.core_on_chip(CoreId{5}), 1u);
  EXPECT_EQ(map.first_core(ChipId{2}), CoreId{4});
  EXPECT_EQ(map.core(ChipId{2}, 1), CoreId{5});
  for (uint32_t c = 0; c < map.cores(); ++c) {
    const CoreId core{c};
    EXPECT_EQ(map.core(map.chip_of(core), map.core_on_chip(core)), core) << "core " << c;
  }
}

TEST(CoreMap, KnowsWhichCoresAndChipsAreTheSlices) {
  const CoreMap map(4, 2);
  EXPECT_TRUE(map.contains(CoreId{7}));
  EXPECT_FALSE(map.contains(CoreId{8}));
  EXPECT_TRUE(map.contains(ChipId{3}));
  EXPECT_FALSE(map.contains(ChipId{4}));
}

TEST(CoreMap, OneCorePerChipMapsCoresToChipsOneToOne) {
  const CoreMap map(8, 1);
  EXPECT_EQ(map.chip_of(CoreId{6}), ChipId{6});
  EXPECT_EQ(map.core_on_chip(CoreId{6}), 0u);
  EXPECT_EQ(map.first_core(ChipId{6}), CoreId{6});
}

TEST(CoreMap, EachHostFeedsItsRunOfChips) {
  const CoreMap map(/*chips=*/16, /*cores_per_chip=*/2, /*chips_per_host=*/4);
  EXPECT_EQ(map.host_of(ChipId{0}), 0u);
  EXPECT_EQ(map.host_of(ChipId{3}), 0u);
  EXPECT_EQ(map.host_of(ChipId{4}), 1u);
  EXPECT_EQ(map.host_of(map.chip_of(CoreId{31})), 3u);
  // A chips_per_host of 0 counts as 1: a host per chip.
  EXPECT_EQ(CoreMap(16, 2, 0).host_of(ChipId{15}), 15u);
}

TEST(CoreMap, IsBuiltFromTheSliceSpec) {
  auto slice = config::load_slice("v3-32");  // 4 x 4 chips of 2 cores, 4 chips per host
  ASSERT_TRUE(slice.ok()) << slice.status();
  const CoreMap map(**slice);
  EXPECT_EQ(map.chips(), (*slice)->chips);
  EXPECT_EQ(map.cores(), (*slice)->cores);
  EXPECT_EQ(map.cores_per_chip(), (*slice)->chip.tensor_cores);
  EXPECT_EQ(map.host_of(ChipId{15}), (*slice)->hosts - 1);
}

}  // namespace core_map_test
}  // namespace tpusim::sim
