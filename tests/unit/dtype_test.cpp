#include "qnn_debug/base/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "qnn_debug/base/checksum.h"
#include "qnn_debug/base/elements.h"

namespace qd {
namespace {

TEST(DType, EveryQnnCodeFromTheSpecIsKnown) {
  const uint32_t codes[] = {8,   22,  50,  100, 264, 278,  306,  356,  534,  550, 562,
                            612, 772, 776, 790, 818, 1028, 1032, 1046, 1074, 1288};
  for (uint32_t code : codes) EXPECT_TRUE(dtype_info(code)) << code;
  EXPECT_FALSE(dtype_info(0));
  EXPECT_FALSE(dtype_info(563));
  size_t count = 0;
  all_dtypes(&count);
  EXPECT_EQ(count, std::size(codes));
}

TEST(DType, StorageBytesPacksFourBitTypes) {
  EXPECT_EQ(storage_bytes(DType::kUFixed4, 5), 3u);
  EXPECT_EQ(storage_bytes(DType::kSFixed4, 4), 2u);
  EXPECT_EQ(storage_bytes(DType::kFloat16, 3), 6u);
  EXPECT_EQ(storage_bytes(DType::kInt64, 2), 16u);
  EXPECT_EQ(storage_bytes(DType::kBool8, 7), 7u);
}

// Element 1 of `bytes` read through the reader visit_dtype picks for `dtype`, as a double.
double second_element(DType dtype, const std::vector<uint8_t>& bytes) {
  return elements::visit_dtype(dtype, [&](auto reader) {
    return static_cast<double>(decltype(reader)::at(bytes.data(), 1));
  });
}

TEST(Elements, EveryDTypeReadsItsOwnLittleEndianLayout) {
  // Element 1 is -2 (or 254 / 65534 unsigned) in each integer width.
  EXPECT_EQ(second_element(DType::kInt8, {0, 0xFE}), -2);
  EXPECT_EQ(second_element(DType::kSFixed8, {0, 0xFE}), -2);
  EXPECT_EQ(second_element(DType::kUInt8, {0, 0xFE}), 254);
  EXPECT_EQ(second_element(DType::kUFixed8, {0, 0xFE}), 254);
  EXPECT_EQ(second_element(DType::kInt16, {0, 0, 0xFE, 0xFF}), -2);
  EXPECT_EQ(second_element(DType::kSFixed16, {0, 0, 0xFE, 0xFF}), -2);
  EXPECT_EQ(second_element(DType::kUInt16, {0, 0, 0xFE, 0xFF}), 65534);
  EXPECT_EQ(second_element(DType::kUFixed16, {0, 0, 0xFE, 0xFF}), 65534);
  const std::vector<uint8_t> minus_two_32 = {0, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(second_element(DType::kInt32, minus_two_32), -2);
  EXPECT_EQ(second_element(DType::kSFixed32, minus_two_32), -2);
  EXPECT_EQ(second_element(DType::kUInt32, minus_two_32), 4294967294.0);
  EXPECT_EQ(second_element(DType::kUFixed32, minus_two_32), 4294967294.0);
  std::vector<uint8_t> minus_two_64(16, 0xFF);
  std::fill_n(minus_two_64.begin(), 8, 0);
  minus_two_64[8] = 0xFE;
  EXPECT_EQ(second_element(DType::kInt64, minus_two_64), -2);
  EXPECT_EQ(second_element(DType::kUInt64, minus_two_64), 18446744073709551614.0);
  // 4-bit: element 1 is the high nibble of byte 0.
  EXPECT_EQ(second_element(DType::kSFixed4, {0xE1}), -2);
  EXPECT_EQ(second_element(DType::kUFixed4, {0xE1}), 14);
  // Floats: 1.5 as binary16 0x3E00, bfloat16 0x3FC0, binary32, binary64.
  EXPECT_EQ(second_element(DType::kFloat16, {0, 0, 0x00, 0x3E}), 1.5);
  EXPECT_EQ(second_element(DType::kBFloat16, {0, 0, 0xC0, 0x3F}), 1.5);
  EXPECT_EQ(second_element(DType::kFloat32, {0, 0, 0, 0, 0, 0, 0xC0, 0x3F}), 1.5);
  std::vector<uint8_t> one_and_half_64(16, 0);
  one_and_half_64[14] = 0xF8;
  one_and_half_64[15] = 0x3F;
  EXPECT_EQ(second_element(DType::kFloat64, one_and_half_64), 1.5);
  // BOOL_8: any non-zero byte is true.
  EXPECT_EQ(second_element(DType::kBool8, {0, 7}), 1);
  EXPECT_EQ(second_element(DType::kBool8, {7, 0}), 0);
}

TEST(DType, ExecuTorchScalarTypesMapBothWays) {
  EXPECT_EQ(dtype_from_executorch(6), DType::kFloat32);
  EXPECT_EQ(dtype_from_executorch(5), DType::kFloat16);
  EXPECT_EQ(dtype_from_executorch(15), DType::kBFloat16);
  EXPECT_EQ(dtype_from_executorch(12), DType::kInt8);   // QINT8 stores int8
  EXPECT_EQ(dtype_from_executorch(13), DType::kUInt8);  // QUINT8
  EXPECT_EQ(dtype_from_executorch(11), DType::kBool8);
  EXPECT_FALSE(dtype_from_executorch(99));
  EXPECT_EQ(executorch_from_dtype(DType::kFloat32), 6);
  EXPECT_EQ(executorch_from_dtype(DType::kSFixed8), 1);    // CHAR
  EXPECT_EQ(executorch_from_dtype(DType::kUFixed16), 27);  // UINT16, not BITS16
  EXPECT_EQ(dtype_from_executorch(22), DType::kUInt16);    // BITS16 still reads
  EXPECT_FALSE(executorch_from_dtype(DType::kSFixed4));
}

TEST(DType, IntegerRangesAreTheSaturationPoints) {
  EXPECT_EQ(integer_range(DType::kSFixed8)->min, -128);
  EXPECT_EQ(integer_range(DType::kSFixed8)->max, 127);
  EXPECT_EQ(integer_range(DType::kUFixed16)->max, 65535);
  EXPECT_EQ(integer_range(DType::kSFixed4)->min, -8);
  EXPECT_EQ(integer_range(DType::kUFixed4)->max, 15);
  EXPECT_FALSE(integer_range(DType::kFloat32));
}

// Bit-at-a-time CRC-32C, the definition the fast paths must agree with.
uint32_t reference_crc32c(const std::vector<uint8_t>& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

TEST(Checksum, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Checksum, AgreesWithBitwiseDefinitionAndExtendsInPieces) {
  std::mt19937 rng(3);
  for (size_t size : {1u, 7u, 8u, 9u, 63u, 1000u, 4097u, 12288u, 12293u, 100003u, 1048589u}) {
    std::vector<uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    const uint32_t whole = crc32c(bytes.data(), bytes.size());
    EXPECT_EQ(whole, reference_crc32c(bytes)) << size;
    const size_t half = size / 3;
    EXPECT_EQ(crc32c_extend(crc32c(bytes.data(), half), bytes.data() + half, size - half), whole);
  }
}

TEST(Checksum, CombinesPiecesCheckedApart) {
  std::mt19937 rng(5);
  std::vector<uint8_t> bytes(70001);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const uint32_t whole = crc32c(bytes.data(), bytes.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{8}, size_t{4096}, size_t{69999}, bytes.size()}) {
    const uint32_t a = crc32c(bytes.data(), split);
    const uint32_t b = crc32c(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(crc32c_combine(a, b, bytes.size() - split), whole) << split;
  }
  // Three pieces, folded left to right as the comparator merges slices.
  const uint32_t ab = crc32c_combine(crc32c(bytes.data(), 100), crc32c(bytes.data() + 100, 900),
                                     900);
  EXPECT_EQ(crc32c_combine(ab, crc32c(bytes.data() + 1000, bytes.size() - 1000),
                           bytes.size() - 1000),
            whole);
}

}  // namespace
}  // namespace qd
