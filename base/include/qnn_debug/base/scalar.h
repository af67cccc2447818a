// Reading single stored values: little-endian loads and the 16-bit float formats. Shared by the
// store's capture-time statistics and the comparator's decoding, so both read bytes the same way.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace qd {

// Element `index` of a little-endian array of T that may sit at any alignment.
template <typename T>
T load_le(const uint8_t* bytes, uint64_t index) {
  T value;
  std::memcpy(&value, bytes + index * sizeof(T), sizeof(T));
  return value;
}

// IEEE binary16 -> binary32 without branches or conditional floating-point operations, so loops
// over it vectorize. A subnormal half m * 2^-24 is (2^-14 + m * 2^-24) - 2^-14, both terms exact.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t magnitude = uint32_t{h} & 0x7FFFu;
  const uint32_t shifted = magnitude << 13;
  const float subnormal = std::bit_cast<float>(shifted + (uint32_t{127 - 14} << 23)) - 0x1p-14f;
  const uint32_t normal = shifted + (uint32_t{127 - 15} << 23);
  const uint32_t inf_nan = shifted | 0x7F800000u;  // keeps the NaN payload
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(magnitude < 0x0400u);
  const uint32_t is_special = 0u - static_cast<uint32_t>(magnitude >= 0x7C00u);
  uint32_t bits = (std::bit_cast<uint32_t>(subnormal) & is_subnormal) | (normal & ~is_subnormal);
  bits = (inf_nan & is_special) | (bits & ~is_special);
  return std::bit_cast<float>(bits | sign);
}

// bfloat16 is the upper half of a binary32.
inline float bfloat16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace qd
