#include "qnn_debug/base/checksum.h"

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
#define QD_CRC_TARGET __attribute__((target("sse4.2")))

QD_CRC_TARGET uint64_t crc32c_words(uint64_t crc, const uint8_t* bytes, size_t words) {
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, bytes + 8 * i, 8);
    crc = _mm_crc32_u64(crc, word);
  }
  return crc;
}

// The CRC instruction has a latency of three cycles but issues every cycle, so one dependency
// chain runs at a third of its speed. Long inputs are cut into stripes of three lanes computed
// side by side; the lane CRCs are then joined, which needs "advance a CRC register over
// kLaneBytes zero bytes": a linear map on 32 bits, tabulated once per byte of the register.
constexpr size_t kLaneBytes = 4096;

struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> table{};
  uint32_t apply(uint32_t crc) const {
    return table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF] ^
           table[3][crc >> 24];
  }
};

QD_CRC_TARGET ZeroShift make_zero_shift() {
  static const std::array<uint8_t, kLaneBytes> zeros{};
  std::array<uint32_t, 32> basis{};  // image of each single-bit register
  for (int bit = 0; bit < 32; ++bit) {
    basis[bit] =
        static_cast<uint32_t>(crc32c_words(uint32_t{1} << bit, zeros.data(), kLaneBytes / 8));
  }
  ZeroShift shift;
  for (size_t k = 0; k < 4; ++k) {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      uint32_t image = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if (byte & (1u << bit)) image ^= basis[8 * k + bit];
      }
      shift.table[k][byte] = image;
    }
  }
  return shift;
}

QD_CRC_TARGET uint32_t crc32c_hardware(uint32_t crc, const uint8_t* bytes, size_t size) {
  static const ZeroShift shift = make_zero_shift();
  uint64_t wide = crc;
  // The register update is linear: crc(s, A B) = shift_|B|(crc(s, A)) ^ crc(0, B).
  while (size >= 3 * kLaneBytes) {
    uint64_t a = wide, b = 0, c = 0;
    for (size_t i = 0; i < kLaneBytes; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, bytes + i, 8);
      std::memcpy(&wb, bytes + kLaneBytes + i, 8);
      std::memcpy(&wc, bytes + 2 * kLaneBytes + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    const uint32_t ab = shift.apply(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b);
    wide = shift.apply(ab) ^ static_cast<uint32_t>(c);
    bytes += 3 * kLaneBytes;
    size -= 3 * kLaneBytes;
  }
  wide = crc32c_words(wide, bytes, size / 8);
  bytes += size / 8 * 8;
  size %= 8;
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

namespace {

// Polynomials over GF(2) modulo the Castagnoli polynomial, reflected as the CRC holds them: bit 31
// is the coefficient of x^0, bit 0 that of x^31.
uint32_t multiply_mod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t term = 0x80000000u; term != 0; term >>= 1) {
    if (a & term) product ^= b;
    b = (b >> 1) ^ ((b & 1u) ? kPolynomial : 0u);  // b * x
  }
  return product;
}

// x^(8 n) modulo the polynomial: what n zero bytes do to a CRC register.
uint32_t zero_bytes_operator(uint64_t n) {
  uint32_t result = 0x80000000u;  // x^0
  uint32_t power = 0x00800000u;   // x^8: one byte
  for (; n != 0; n >>= 1) {
    if (n & 1u) result = multiply_mod(result, power);
    power = multiply_mod(power, power);
  }
  return result;
}

}  // namespace

// The pre- and post-inversion of crc32c_extend cancel out here: crc(A B) is crc(A) carried
// through |B| zero bytes, plus crc(B).
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  return multiply_mod(zero_bytes_operator(size_b), crc_a) ^ crc_b;
}

}  // namespace qd
