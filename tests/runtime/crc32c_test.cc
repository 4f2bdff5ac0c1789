#include "runtime/data/crc32c.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace tpusim::runtime::data {
namespace crc32c_test {

TEST(Crc32c, MatchesTheStandardCheckValue) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_portable(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

// RFC 3720 (iSCSI), appendix B.4: 32 bytes of zeros and 32 bytes of 0xff.
TEST(Crc32c, MatchesRfc3720Vectors) {
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
}

TEST(Crc32c, HardwareAndPortablePathsAgreeOnEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  // Long enough for the three-stream rounds (3 x 4096 and 3 x 128 bytes) and their tails.
  std::string bytes(30000, '\0');
  for (char& b : bytes) b = static_cast<char>(rng());
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= bytes.size(); len += len < 1000 ? 7 : 997) {
      ASSERT_EQ(crc32c(bytes.data() + start, len), crc32c_portable(bytes.data() + start, len))
          << "start " << start << " length " << len;
    }
  }
}

// TFRecord's masking rotates right by 15 and adds a constant; checked against a bit-at-a-time
// Python model of the same definition.
TEST(Crc32c, MaskedValuesMatchAnIndependentModel) {
  const std::string data = "CRC test, one two";
  EXPECT_EQ(masked_crc32c(data.data(), data.size()), 0x857FE018u);
  const char length17[8] = {17, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(masked_crc32c(length17, 8), 0x2EB56D9Du);
}

}  // namespace crc32c_test
}  // namespace tpusim::runtime::data
