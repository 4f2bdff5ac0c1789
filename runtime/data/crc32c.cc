#include "runtime/data/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tpusim::runtime::data {
namespace {

// Slicing-by-8 tables for the portable path.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

#if defined(__x86_64__)
// The crc32 instruction has a latency of 3 cycles and a throughput of 1: three independent
// streams over three adjacent blocks keep it busy, and the CRC register's linearity joins them:
// crc(r, A || B) = crc(r, A followed by |B| zeros) ^ crc(0, B). Appending zeros is a linear map
// of the register, applied with four byte-indexed tables.
struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> t{};
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

__attribute__((target("sse4.2"))) ZeroShift make_zero_shift(size_t zeros) {
  std::array<uint32_t, 32> basis{};
  for (int k = 0; k < 32; ++k) {
    uint64_t c = uint32_t{1} << k;
    for (size_t i = 0; i < zeros / 8; ++i) c = _mm_crc32_u64(c, 0);
    basis[k] = static_cast<uint32_t>(c);
  }
  ZeroShift z;
  for (int b = 0; b < 4; ++b) {
    for (uint32_t x = 0; x < 256; ++x) {
      uint32_t v = 0;
      for (int i = 0; i < 8; ++i) {
        if ((x >> i) & 1u) v ^= basis[8 * b + i];
      }
      z.t[b][x] = v;
    }
  }
  return z;
}

constexpr size_t kLongBlock = 4096;  // bytes per stream in a long round
constexpr size_t kShortBlock = 128;

// Three streams of `block` bytes each from p; returns the register after all 3 * block bytes.
__attribute__((target("sse4.2"))) inline uint64_t crc_three_streams(uint64_t c0, const uint8_t* p,
                                                                    size_t block,
                                                                    const ZeroShift& shift) {
  uint64_t c1 = 0, c2 = 0;
  for (size_t i = 0; i < block; i += 8) {
    uint64_t w0, w1, w2;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p + block + i, 8);
    std::memcpy(&w2, p + 2 * block + i, 8);
    c0 = _mm_crc32_u64(c0, w0);
    c1 = _mm_crc32_u64(c1, w1);
    c2 = _mm_crc32_u64(c2, w2);
  }
  c0 = shift(static_cast<uint32_t>(c0)) ^ c1;
  return shift(static_cast<uint32_t>(c0)) ^ c2;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n) {
  static const ZeroShift kLongShift = make_zero_shift(kLongBlock);
  static const ZeroShift kShortShift = make_zero_shift(kShortBlock);
  uint64_t c = 0xFFFFFFFFu;
  while (n >= 3 * kLongBlock) {
    c = crc_three_streams(c, p, kLongBlock, kLongShift);
    p += 3 * kLongBlock;
    n -= 3 * kLongBlock;
  }
  while (n >= 3 * kShortBlock) {
    c = crc_three_streams(c, p, kShortBlock, kShortShift);
    p += 3 * kShortBlock;
    n -= 3 * kShortBlock;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32 ^ 0xFFFFFFFFu;
}
#endif

}  // namespace

uint32_t crc32c_portable(const void* data, size_t size) {
  const auto& t = tables().t;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  while (size >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return c ^ 0xFFFFFFFFu;
}

bool crc32c_uses_hardware() {
#if defined(__x86_64__)
  static const bool kHas = __builtin_cpu_supports("sse4.2");
  return kHas;
#else
  return false;
#endif
}

uint32_t crc32c(const void* data, size_t size) {
#if defined(__x86_64__)
  if (crc32c_uses_hardware()) return crc32c_sse42(static_cast<const uint8_t*>(data), size);
#endif
  return crc32c_portable(data, size);
}

}  // namespace tpusim::runtime::data
