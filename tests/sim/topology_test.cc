// The interconnect's shape: dimension-order routes the shorter way round, the links between a
// chip's cores, the core grid and its snake ring (neighbours one hop apart), and the bounds.
#include "sim/net/topology.h"

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/net/collective_bound.h"
#include "tests/sim/core_ids.h"

namespace tpusim::sim {
namespace topology_test {

const config::SliceSpec& slice(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const config::SliceSpec>> loaded;
  auto& s = loaded[name];
  if (s == nullptr) s = *config::load_slice(name);
  return *s;
}

std::vector<std::string> names(const Topology& t, const std::vector<uint32_t>& links) {
  std::vector<std::string> out;
  for (uint32_t l : links) out.push_back(t.link_name(l));
  return out;
}

TEST(Topology, RoutesGoXThenYTheShorterWayRound) {
  const Topology t(slice("v3-32"));  // 4 x 4 torus, 2 cores per chip
  EXPECT_EQ(t.chips(), 16u);
  EXPECT_EQ(t.cores(), 32u);
  // Chip 0 (0,0) to chip 15 (3,3): one hop -x and one hop -y round the torus.
  EXPECT_EQ(names(t, t.route(CoreId{0}, CoreId{30})),
            (std::vector<std::string>{"chip 0 -x", "chip 3 -y"}));
  // Chip 1 (1,0) to chip 11 (3,2): two hops +x (ties go +), then two hops +y.
  EXPECT_EQ(names(t, t.route(CoreId{2}, CoreId{22})),
            (std::vector<std::string>{"chip 1 +x", "chip 2 +x", "chip 3 +y", "chip 7 +y"}));
  // The two cores of a chip use the on-chip link, each direction its own.
  EXPECT_EQ(names(t, t.route(CoreId{4}, CoreId{5})),
            (std::vector<std::string>{"chip 2 core 0->1"}));
  EXPECT_EQ(names(t, t.route(CoreId{5}, CoreId{4})),
            (std::vector<std::string>{"chip 2 core 1->0"}));
  EXPECT_TRUE(t.route(CoreId{7}, CoreId{7}).empty());
  EXPECT_DOUBLE_EQ(t.link(t.route(CoreId{0}, CoreId{2})[0]).bytes_per_s, 100e9);
  EXPECT_DOUBLE_EQ(t.link(t.route(CoreId{0}, CoreId{1})[0]).bytes_per_s, 200e9);
}

TEST(Topology, AMeshHasNoWraparound) {
  auto spec = slice("v3-32");
  spec.topology.torus = false;
  const Topology t(spec);
  EXPECT_EQ(names(t, t.route(CoreId{0}, CoreId{30})),
            (std::vector<std::string>{"chip 0 +x", "chip 1 +x", "chip 2 +x", "chip 3 +y",
                                      "chip 7 +y", "chip 11 +y"}));
}

// A v4 cube of 4 x 4 x 4 chips: routes go X, then Y, then Z; the snake ring still visits every
// core one hop at a time (Y' runs over y and z).
TEST(Topology, ACubeRoutesInThreeDimensions) {
  auto spec = slice("v4-8");
  spec.topology.shape = {4, 4, 4};
  spec.topology.torus = true;
  spec.chips = 64;
  spec.cores = 128;
  const Topology t(spec);
  // Chip 0 (0,0,0) to chip 63 (3,3,3): one hop the negative way in each dimension.
  EXPECT_EQ(names(t, t.route(CoreId{0}, CoreId{126})),
            (std::vector<std::string>{"chip 0 -x", "chip 3 -y", "chip 15 -z"}));
  // Chip 21 (1,1,1) to chip 42 (2,2,2).
  EXPECT_EQ(names(t, t.route(CoreId{42}, CoreId{84})),
            (std::vector<std::string>{"chip 21 +x", "chip 22 +y", "chip 26 +z"}));
  EXPECT_EQ(t.grid_x(), 8u);
  EXPECT_EQ(t.grid_y(), 16u);
  const auto ring = t.snake_ring();
  for (size_t i = 0; i < ring.size(); ++i)
    EXPECT_EQ(t.route(ring[i], ring[(i + 1) % ring.size()]).size(), 1u) << i;
}

// Every two neighbours of the snake ring are one hop apart, and on a torus the ends too.
TEST(Topology, TheSnakeRingVisitsEveryCoreOneHopAtATime) {
  for (const char* name : {"v3-8", "v3-32", "v3-2048"}) {
    const Topology t(slice(name));
    const auto ring = t.snake_ring();
    ASSERT_EQ(ring.size(), t.cores()) << name;
    std::vector<bool> seen(t.cores(), false);
    for (size_t i = 0; i < ring.size(); ++i) {
      seen[index(ring[i])] = true;
      EXPECT_EQ(t.route(ring[i], ring[(i + 1) % ring.size()]).size(), 1u)
          << name << " between " << ring[i] << " and " << ring[(i + 1) % ring.size()];
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(t.cores()));
  }
  const Topology v3_8(slice("v3-8"));
  EXPECT_EQ(v3_8.snake_ring(), cores({0, 1, 2, 3, 7, 6, 5, 4}));
  EXPECT_EQ(v3_8.grid_x(), 4u);
  EXPECT_EQ(v3_8.grid_y(), 2u);
}

// v3-32's snake ring: 32 members, half the edges on-chip (200 GB/s, 100 ns), half ICI
// (100 GB/s, 1 us): a = 0.55 us on average, B = 100 GB/s.
TEST(CollectiveBound, FollowsTheFormulas) {
  const Topology t(slice("v3-32"));
  const double n = 256.0 * (1 << 20);
  const CollectiveBound ring = all_reduce_bound(t, isa::Collective::RING, n);
  EXPECT_NEAR(ring.latency_seconds, 2 * 31 * 0.55e-6, 1e-12);
  EXPECT_NEAR(ring.bandwidth_seconds, 2.0 * 31 / 32 * n / 100e9, 1e-12);
  const CollectiveBound bidir = all_reduce_bound(t, isa::Collective::BIDIR_RING, n);
  EXPECT_NEAR(bidir.bandwidth_seconds, ring.bandwidth_seconds / 2, 1e-12);
  // Rows of 8 cores (4 chips), columns of 4 chips (all ICI).
  const CollectiveBound torus = all_reduce_bound(t, isa::Collective::TORUS_2D, n);
  EXPECT_NEAR(torus.latency_seconds, 2 * 7 * 0.55e-6 + 2 * 3 * 1e-6, 1e-12);
  EXPECT_NEAR(torus.bandwidth_seconds, 2.0 * 7 / 8 * n / 100e9 + 2.0 * 3 / 4 * (n / 8) / 100e9,
              1e-12);
  EXPECT_DOUBLE_EQ(torus.seconds, torus.latency_seconds + torus.bandwidth_seconds);
}

// On a ring of 2 chips both ways round are one hop, each over its own link: a ring that goes
// round the negative way takes the negative links, so the two ways never share one.
TEST(Topology, TiesGoTheWayTheRingGoes) {
  const Topology t(slice("v3-8"));  // 2 x 2 torus
  EXPECT_EQ(names(t, t.route(CoreId{0}, CoreId{2})), (std::vector<std::string>{"chip 0 +x"}));
  EXPECT_EQ(names(t, t.route(CoreId{0}, CoreId{2}, TieBreak::kNegative)),
            (std::vector<std::string>{"chip 0 -x"}));
  EXPECT_EQ(names(t, t.route(CoreId{2}, CoreId{0}, TieBreak::kNegative)),
            (std::vector<std::string>{"chip 1 -x"}));
  // Not a tie: the shorter way round, whatever the ring's.
  const Topology v3_32(slice("v3-32"));  // 4 x 4
  EXPECT_EQ(names(v3_32, v3_32.route(CoreId{0}, CoreId{2}, TieBreak::kNegative)),
            (std::vector<std::string>{"chip 0 +x"}));
  EXPECT_EQ(names(v3_32, v3_32.route(CoreId{0}, CoreId{4}, TieBreak::kNegative)),
            (std::vector<std::string>{"chip 0 -x", "chip 3 -x"}));
}

// v4-128: a 4 x 4 x 4 cube of chips with 2 cores each, so the torus algorithm's dimensions are
// X' (8 cores: 4 on-chip edges at 200 GB/s, 100 ns and 4 ICI hops at 45 GB/s, 1 us; a = 0.55 us),
// Y and Z (4 chips, ICI only). Each way round, three parts of n/6 go X'YZ, YZX', ZX'Y. A Z link
// carries 2(3/4) n/6 of the part that starts with Z, 1/4 of that for the one that starts with
// X' (divided by X's 8 and Y's 4), 1/32 of it for the other, twice over (a chip's two cores'
// lines share it): the busiest, and it is the plan's own link floor.
TEST(CollectiveBound, TheTorusSharesEveryDimension) {
  const Topology t(slice("v4-128"));
  const double n = 64.0 * (1 << 20), B = 45e9;
  const CollectiveBound torus = all_reduce_bound(t, isa::Collective::TORUS, n);
  EXPECT_NEAR(torus.latency_seconds, 2 * 7 * 0.55e-6 + 2 * 3 * 1e-6 + 2 * 3 * 1e-6, 1e-12);
  const double x = 2.0 * 7 / 8 * n / 6 * (1 + 1.0 / 16 + 1.0 / 4) / B;
  const double y = 2 * (2.0 * 3 / 4 * n / 6 * (1.0 / 8 + 1 + 1.0 / 32)) / B;
  const double z = 2 * (2.0 * 3 / 4 * n / 6 * (1.0 / 32 + 1.0 / 4 + 1)) / B;
  EXPECT_GT(z, y);
  EXPECT_GT(y, x);
  EXPECT_NEAR(torus.bandwidth_seconds, z, 1e-12);
  isa::Collective c;
  c.set_kind(isa::Collective::ALL_REDUCE);
  c.set_algorithm(isa::Collective::TORUS);
  c.set_elements(static_cast<uint64_t>(n / 4));
  EXPECT_NEAR(link_floor_seconds(t, plan_collective(c, t.snake_ring(), t)), z, 1e-9);
  // torus2d on the same cube: rows of X' and columns of 16 chips snaking over Y and Z.
  const CollectiveBound torus2d = all_reduce_bound(t, isa::Collective::TORUS_2D, n);
  EXPECT_GT(torus2d.bandwidth_seconds, 3 * torus.bandwidth_seconds);
}

}  // namespace topology_test
}  // namespace tpusim::sim
