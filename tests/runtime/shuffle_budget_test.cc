// A shuffle buffer's bytes are held against the host's memory budget as it fills (each time
// they double): a buffer of 10,000 elements that nothing bounds in size (JPEG records) is refused
// before it takes the host's memory, while one that fits is untouched.
#include <cstdlib>
#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "common/host_budget.h"
#include "runtime/data/dataset.h"
#include "tests/under_sanitizer.h"

namespace tpusim::runtime::data {
namespace shuffle_budget_test {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Elements of 8 MiB of bytes each, `count` of them, through a shuffle buffer of 10,000.
DatasetPtr big_elements(int64_t count) {
  return Dataset::range(count)
      ->map([](Element e) -> absl::StatusOr<Element> {
        e["image"] = scalar_bytes(std::string(8 * kMiB, 'x'));
        return e;
      })
      ->shuffle(10000, /*seed=*/1);
}

// In a child with 200 MiB of address space beside what it holds: 1,000 elements of 8 MiB would
// need 8 GB; the buffer is refused at 128 MiB (16 elements), before the next 128 MiB. Returns
// the first check that failed, or 0.
int refused_under_a_limit() {
  const uint64_t limit = host_budget_internal::held_address_space() + 200 * kMiB;
  const rlimit r{limit, limit};
  if (setrlimit(RLIMIT_AS, &r) != 0) return 1;
  auto it = big_elements(1000)->make_iterator();
  auto first = it->next();
  if (first.ok()) return 2;
  if (first.status().code() != absl::StatusCode::kResourceExhausted) return 3;
  const std::string message(first.status().message());
  if (message.find("shuffle: a buffer of 10000 elements, whose first 16 hold 134.22 MB, taking "
                   "as many bytes again needs 134.22 MB, over this host's memory budget of ") ==
      std::string::npos)
    return 4;
  if (message.find("(ulimit -v)") == std::string::npos) return 5;
  return 0;
}

TEST(ShuffleBudget, ABufferOverTheMemoryLeftIsRefusedAsItFills) {
  if (testing::kUnderSanitizer)
    GTEST_SKIP() << "a sanitizer's shadow memory cannot run under an address-space limit";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(refused_under_a_limit()), ::testing::ExitedWithCode(0), "");
}

TEST(ShuffleBudget, ABufferThatFitsGivesEveryElement) {
  auto it = big_elements(20)->make_iterator();  // 160 MiB: checked at 8, 16, 32, 64 and 128
  int64_t n = 0;
  for (auto e = it->next(); e.ok() && e->has_value(); e = it->next()) {
    EXPECT_EQ((**e).at("image").bytes.at(0).size(), 8 * kMiB);
    ++n;
  }
  EXPECT_EQ(n, 20);
}

}  // namespace shuffle_budget_test
}  // namespace tpusim::runtime::data
