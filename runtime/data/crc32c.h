#pragma once
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF), as
// TFRecord framing uses it: the CPU's crc32 instruction (SSE4.2) when the machine has it,
// a table-driven fallback otherwise. crc32c("123456789") = 0xE3069283.

#include <cstddef>
#include <cstdint>

namespace tpusim::runtime::data {

uint32_t crc32c(const void* data, size_t size);
// The portable implementation, also used to check the hardware one.
uint32_t crc32c_portable(const void* data, size_t size);
bool crc32c_uses_hardware();

// TFRecord's masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t masked_crc32c(const void* data, size_t size) {
  return mask_crc(crc32c(data, size));
}

}  // namespace tpusim::runtime::data
