// TPUSIM_EIGEN_CACHE_SIZES's parser: the sizes another host's CPU would give Eigen.
#include "sim/numerics/eigen_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::sim {
namespace eigen_cache_test {

using ::testing::HasSubstr;

TEST(EigenCacheSizes, ParsesBytesAndPowerOfTwoSuffixes) {
  CacheSizes sizes;
  ASSERT_TRUE(parse_cache_sizes("48K,2M,105M", &sizes).ok());
  EXPECT_EQ(sizes.l1, 48 * 1024);
  EXPECT_EQ(sizes.l2, 2 * 1024 * 1024);
  EXPECT_EQ(sizes.l3, 105 * 1024 * 1024);
  ASSERT_TRUE(parse_cache_sizes("32768,524288,33554432", &sizes).ok());
  EXPECT_EQ(sizes.l1, 32768);
  EXPECT_EQ(sizes.l3, 33554432);
}

TEST(EigenCacheSizes, RefusesWhatIsNoHostsCachesNamingTheVariable) {
  CacheSizes sizes{1, 2, 3};
  const auto why = [&](const char* spec) {
    const absl::Status s = parse_cache_sizes(spec, &sizes);
    EXPECT_FALSE(s.ok()) << spec;
    EXPECT_THAT(std::string(s.message()), HasSubstr("TPUSIM_EIGEN_CACHE_SIZES='"));
    return std::string(s.message());
  };
  EXPECT_THAT(why("48K,2M"), HasSubstr("three sizes are needed"));
  EXPECT_THAT(why("48K,2M,105M,1G"), HasSubstr("three sizes are needed"));
  EXPECT_THAT(why("48K,,105M"), HasSubstr("'' is not a size"));
  EXPECT_THAT(why("48KB,2M,105M"), HasSubstr("'48KB' is not a size"));
  EXPECT_THAT(why("-48K,2M,105M"), HasSubstr("'-48K' is not a size"));
  EXPECT_THAT(why("512,2M,105M"), HasSubstr("'512' is not a size in [1K, 4096M]"));
  EXPECT_THAT(why("48K,2M,8192M"), HasSubstr("'8192M' is not a size"));
  EXPECT_THAT(why("99999999999999999999,2M,3M"), HasSubstr("is not a size"));
  EXPECT_THAT(why("2M,48K,105M"), HasSubstr("L1 <= L2 <= L3"));
  EXPECT_EQ(sizes.l1, 1) << "a refused value leaves the sizes as they were";
}

}  // namespace eigen_cache_test
}  // namespace tpusim::sim
