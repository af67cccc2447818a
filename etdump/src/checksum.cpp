#include "qnn_debug/checksum.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define QD_CRC_X86 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define QD_CRC_ARM 1
#endif

namespace qd {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // reflected Castagnoli

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    tables[0][byte] = crc;
  }
  for (uint32_t byte = 0; byte < 256; ++byte) {
    for (size_t k = 1; k < 8; ++k) {
      const uint32_t prev = tables[k - 1][byte];
      tables[k][byte] = (prev >> 8) ^ tables[0][prev & 0xFFu];
    }
  }
  return tables;
}

constexpr Tables kTables = make_tables();

uint32_t crc32c_portable(uint32_t crc, const uint8_t* bytes, size_t size) {
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    word ^= crc;  // little-endian: the CRC folds into the first four bytes
    crc = kTables[7][word & 0xFF] ^ kTables[6][(word >> 8) & 0xFF] ^
          kTables[5][(word >> 16) & 0xFF] ^ kTables[4][(word >> 24) & 0xFF] ^
          kTables[3][(word >> 32) & 0xFF] ^ kTables[2][(word >> 40) & 0xFF] ^
          kTables[1][(word >> 48) & 0xFF] ^ kTables[0][word >> 56];
    bytes += 8;
    size -= 8;
  }
  while (size-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *bytes++) & 0xFF];
  return crc;
}

#if defined(QD_CRC_X86)
__attribute__((target("sse4.2"))) uint32_t crc32c_hardware(uint32_t crc, const uint8_t* bytes,
                                                           size_t size) {
  uint64_t wide = crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    wide = _mm_crc32_u64(wide, word);
    bytes += 8;
    size -= 8;
  }
  auto narrow = static_cast<uint32_t>(wide);
  while (size-- > 0) narrow = _mm_crc32_u8(narrow, *bytes++);
  return narrow;
}
bool hardware_available() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}
#elif defined(QD_CRC_ARM)
uint32_t crc32c_hardware(uint32_t crc, const uint8_t* bytes, size_t size) {
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    crc = __crc32cd(crc, word);
    bytes += 8;
    size -= 8;
  }
  while (size-- > 0) crc = __crc32cb(crc, *bytes++);
  return crc;
}
bool hardware_available() { return true; }
#else
uint32_t crc32c_hardware(uint32_t crc, const uint8_t* bytes, size_t size) {
  return crc32c_portable(crc, bytes, size);
}
bool hardware_available() { return false; }
#endif

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  crc =
      hardware_available() ? crc32c_hardware(crc, bytes, size) : crc32c_portable(crc, bytes, size);
  return ~crc;
}

}  // namespace qd
