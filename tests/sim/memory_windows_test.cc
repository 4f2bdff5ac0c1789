// sim::Memory where the whole reservation is refused (an address-space limit, as `ulimit -v`
// sets): windows map only what is touched, wherever it is, and keep every byte written.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sim/memory/memory.h"
#include "tests/under_sanitizer.h"

namespace tpusim::sim {
namespace memory_windows_test {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

using tpusim::testing::kUnderSanitizer;

// Runs in a child (a death test) with 2 GB of address space, where a 64 GiB memory cannot be
// reserved; returns the first check that failed, or 0.
int windows_under_a_limit() {
  const rlimit limit{2 * kGiB, 2 * kGiB};
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 1;
  Memory hbm("hbm", 64 * kGiB);
  const std::vector<uint8_t> a(4096, 0xab), b(4096, 0xcd);
  hbm.write(100, a.data(), a.size());        // a window at 0
  hbm.write(40 * kGiB, b.data(), b.size());  // one 40 GiB in, not a buffer grown to it
  if (hbm.base_is_stable() || hbm.windows() != 2) return 2;
  std::vector<uint8_t> back(4096);
  hbm.read(100, back.data(), back.size());
  if (back != a) return 3;
  hbm.read(40 * kGiB, back.data(), back.size());
  if (back != b) return 4;
  // A range across the gap between two windows 32 MiB apart merges them, keeping both.
  hbm.write(40 * kGiB + 48 * kMiB, a.data(), a.size());
  if (hbm.windows() != 3) return 5;
  uint8_t* base = hbm.base_covering(40 * kGiB, 40 * kGiB + 49 * kMiB);
  if (hbm.windows() != 2) return 6;
  if (std::memcmp(base + 40 * kGiB, b.data(), b.size()) != 0) return 7;
  if (std::memcmp(base + 40 * kGiB + 48 * kMiB, a.data(), a.size()) != 0) return 8;
  // Untouched bytes read as zero.
  hbm.read(40 * kGiB + 20 * kMiB, back.data(), back.size());
  if (back != std::vector<uint8_t>(4096, 0)) return 9;
  // What is touched stays under the limit; what cannot be mapped is an error, not a crash.
  try {
    (void)hbm.base_covering(0, 8 * kGiB);
    return 10;
  } catch (const std::runtime_error& e) {
    if (std::strstr(e.what(), "hbm: the host cannot map") == nullptr) return 11;
  }
  return 0;
}

TEST(MemoryWindows, ARefusedReservationMapsOnlyWhatIsTouched) {
  if (kUnderSanitizer)
    GTEST_SKIP() << "a sanitizer's shadow memory cannot run under an address-space limit";
  EXPECT_EXIT(std::_Exit(windows_under_a_limit()), ::testing::ExitedWithCode(0), "");
}

TEST(MemoryWindows, TheWholeReservationIsStableAndCountsResidentPages) {
  Memory vmem("vmem", 64 * kMiB);
  const std::vector<uint8_t> a(8192, 1);
  vmem.write(32 * kMiB, a.data(), a.size());
  EXPECT_TRUE(vmem.base_is_stable());
  EXPECT_EQ(vmem.windows(), 0u);
  EXPECT_EQ(vmem.stable_base(), vmem.base_covering(0, 0));
  EXPECT_GE(vmem.allocated(), a.size());
  EXPECT_LT(vmem.allocated(), 64 * kMiB);
}

}  // namespace memory_windows_test
}  // namespace tpusim::sim
