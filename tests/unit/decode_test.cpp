#include "qnn_debug/compare/decode.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "../common/records.h"

// Private to qd_compare: the test hook that picks the kernels' instruction set.
#include "kernel_dispatch.h"

namespace qd::compare {
namespace {

using testing::tensor_record;

void quantize(TensorRecord& t, std::vector<double> scales, std::vector<int64_t> offsets,
              QuantConvention convention, int32_t axis = -1) {
  t.quant.scales = std::move(scales);
  t.quant.offsets = std::move(offsets);
  t.quant.convention = convention;
  t.quant.axis = axis;
}

template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Packs 4-bit values two per byte, low nibble first.
std::vector<uint8_t> pack_nibbles(const std::vector<int>& values) {
  std::vector<uint8_t> bytes((values.size() + 1) / 2, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const auto nibble = static_cast<uint8_t>(values[i] & 0xF);
    bytes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? nibble : nibble << 4);
  }
  return bytes;
}

std::vector<float> decode_all(const TensorRecord& t, const std::vector<uint8_t>& bytes,
                              DecodeCounts* counts = nullptr) {
  std::vector<float> out(t.element_count());
  const DecodeCounts c = decode(t, bytes.data(), 0, out.size(), out.data());
  if (counts) *counts = c;
  return out;
}

bool same_float(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

// Independent IEEE binary16 decoding through double arithmetic.
float reference_half(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));
  if (exponent == 31) {
    if (mantissa == 0) return static_cast<float>(sign * std::numeric_limits<double>::infinity());
    return std::bit_cast<float>(((h & 0x8000u) << 16) | 0x7F800000u |
                                (static_cast<uint32_t>(mantissa) << 13));
  }
  return static_cast<float>(sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15));
}

TEST(SaturationRange, MatchesIntegerRangeAndNarrowsToTheBitwidth) {
  size_t count = 0;
  const DTypeInfo* all = all_dtypes(&count);
  for (size_t i = 0; i < count; ++i) {
    const TensorRecord t = tensor_record("t", all[i].dtype, {1});
    const auto range = saturation_range(t);
    if (all[i].kind == DTypeKind::kFloat || all[i].kind == DTypeKind::kBool) {
      EXPECT_FALSE(range) << all[i].name;
      continue;
    }
    ASSERT_TRUE(range) << all[i].name;
    const RawRange expected = *integer_range(all[i].dtype);
    EXPECT_EQ(static_cast<double>(range->min), expected.min) << all[i].name;
    EXPECT_EQ(static_cast<double>(range->max), expected.max) << all[i].name;
  }
  TensorRecord t = tensor_record("t", DType::kSFixed8, {1});
  t.quant.bitwidth = 4;
  EXPECT_EQ(saturation_range(t)->min, -8);
  EXPECT_EQ(saturation_range(t)->max, 7u);
  t.dtype = DType::kUFixed8;
  EXPECT_EQ(saturation_range(t)->min, 0);
  EXPECT_EQ(saturation_range(t)->max, 15u);
  t.dtype = DType::kSFixed32;
  t.quant.bitwidth = 16;
  EXPECT_EQ(saturation_range(t)->min, -32768);
  EXPECT_EQ(saturation_range(t)->max, 32767u);
  t.quant.bitwidth = 32;  // equal to the width: no narrowing
  EXPECT_EQ(saturation_range(t)->min, std::numeric_limits<int32_t>::min());
  t.dtype = DType::kUInt64;
  t.quant.bitwidth = 0;
  EXPECT_EQ(saturation_range(t)->max, std::numeric_limits<uint64_t>::max());
  t.dtype = DType::kInt64;
  EXPECT_EQ(saturation_range(t)->min, std::numeric_limits<int64_t>::min());
}

// Every byte-aligned integer dtype, unquantized and quantized in both conventions, at several
// lengths (table and arithmetic paths) and start offsets, against Quantization::dequantize.
template <typename T>
void check_integer_type(DType dtype) {
  SCOPED_TRACE(std::string(info(dtype).name));
  std::mt19937_64 rng(static_cast<uint64_t>(dtype));
  for (uint64_t length : {1u, 7u, 16u, 1023u, 1024u, 5000u}) {
    std::vector<T> values(length);
    for (auto& v : values) v = static_cast<T>(rng());
    values[0] = std::numeric_limits<T>::min();
    if (length > 1) values[length - 1] = std::numeric_limits<T>::max();
    const std::vector<uint8_t> bytes = to_bytes(values);
    uint64_t expected_min = 0, expected_max = 0;
    for (T v : values) {
      expected_min += v == std::numeric_limits<T>::min();
      expected_max += v == std::numeric_limits<T>::max();
    }
    // Unquantized: a direct conversion.
    TensorRecord plain = tensor_record("t", dtype, {length});
    DecodeCounts counts;
    std::vector<float> out = decode_all(plain, bytes, &counts);
    for (uint64_t i = 0; i < length; ++i) {
      ASSERT_EQ(out[i], static_cast<float>(values[i])) << i;
    }
    EXPECT_EQ(counts.at_min, expected_min);
    EXPECT_EQ(counts.at_max, expected_max);

    for (QuantConvention convention : {QuantConvention::kQnnOffset, QuantConvention::kZeroPoint}) {
      TensorRecord t = tensor_record("t", dtype, {length});
      quantize(t, {0.0123456789}, {-37}, convention);
      out = decode_all(t, bytes, &counts);
      for (uint64_t i = 0; i < length; ++i) {
        const auto expected =
            static_cast<float>(t.quant.dequantize(static_cast<double>(values[i]), 0));
        ASSERT_EQ(out[i], expected) << i;
      }
      EXPECT_EQ(counts.at_min, expected_min);
      EXPECT_EQ(counts.at_max, expected_max);
      // A run starting inside the tensor.
      const uint64_t first = length / 3;
      const uint64_t count = length - first;
      std::vector<float> part(count);
      decode(t, bytes.data() + first * sizeof(T), first, count, part.data());
      for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(part[i], out[first + i]) << i;
    }
  }
}

TEST(Decode, EveryByteAlignedIntegerType) {
  check_integer_type<int8_t>(DType::kInt8);
  check_integer_type<int8_t>(DType::kSFixed8);
  check_integer_type<uint8_t>(DType::kUInt8);
  check_integer_type<uint8_t>(DType::kUFixed8);
  check_integer_type<int16_t>(DType::kInt16);
  check_integer_type<int16_t>(DType::kSFixed16);
  check_integer_type<uint16_t>(DType::kUInt16);
  check_integer_type<uint16_t>(DType::kUFixed16);
  check_integer_type<int32_t>(DType::kInt32);
  check_integer_type<int32_t>(DType::kSFixed32);
  check_integer_type<uint32_t>(DType::kUInt32);
  check_integer_type<uint32_t>(DType::kUFixed32);
  check_integer_type<int64_t>(DType::kInt64);
  check_integer_type<uint64_t>(DType::kUInt64);
}

TEST(Decode, QuantizationConventionsByHand) {
  TensorRecord t = tensor_record("t", DType::kUFixed8, {3});
  const std::vector<uint8_t> bytes = {0, 128, 255};
  quantize(t, {0.5}, {-128}, QuantConvention::kQnnOffset);  // real = (q - 128) * 0.5
  EXPECT_EQ(decode_all(t, bytes), (std::vector<float>{-64.0f, 0.0f, 63.5f}));
  quantize(t, {0.5}, {128}, QuantConvention::kZeroPoint);  // same, as a zero point
  EXPECT_EQ(decode_all(t, bytes), (std::vector<float>{-64.0f, 0.0f, 63.5f}));
  quantize(t, {0.25}, {3}, QuantConvention::kQnnOffset);  // (q + 3) * 0.25
  EXPECT_EQ(decode_all(t, bytes), (std::vector<float>{0.75f, 32.75f, 64.5f}));
}

TEST(Decode, DequantizesInDoubleThenRoundsOnce) {
  // (q + offset) * scale in float would differ from the double result for this scale.
  TensorRecord t = tensor_record("t", DType::kSFixed16, {2000});
  quantize(t, {1.0 / 3.0 + 1e-12}, {12345}, QuantConvention::kQnnOffset);
  std::vector<int16_t> values(2000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int16_t>(i * 31 - 30000);
  const std::vector<float> out = decode_all(t, to_bytes(values));
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(out[i], static_cast<float>((values[i] + 12345.0) * (1.0 / 3.0 + 1e-12))) << i;
  }
}

// Into Split, what the metrics read: hi + lo is the dequantized value to 2^-46 of it, whether
// computed directly in floats (per-tensor 8- and 16-bit) or through double (a scale or offset the
// float form cannot hold exactly, per-axis, 4-bit), and hi is that value rounded to float or,
// computed in floats, a neighbour of it.
TEST(Decode, SplitValuesHoldTheDequantizedValue) {
  struct Case {
    DType dtype;
    double scale;
    int64_t offset;
  };
  const Case cases[] = {{DType::kSFixed8, 1.0 / 3.0 + 1e-12, -37},
                        {DType::kUFixed8, 0.0123456789, -89},
                        {DType::kSFixed16, 1.0 / 7.0, 12345},
                        {DType::kUFixed16, 3.3e-5, -32768},
                        {DType::kSFixed8, 1e-30, 0},
                        {DType::kUFixed16, 0.5, (int64_t{1} << 23) + 1},
                        {DType::kSFixed4, 0.37, 3}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << info(c.dtype).name << " scale " << c.scale);
    const unsigned bits = info(c.dtype).bits;
    const uint64_t count = 3000;
    std::vector<uint8_t> bytes((count * bits + 7) / 8);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    TensorRecord t = tensor_record("t", c.dtype, {count});
    quantize(t, {c.scale}, {c.offset}, QuantConvention::kQnnOffset);
    std::vector<double> exact(count);
    std::vector<Split> split(count);
    decode(t, bytes.data(), 0, count, exact.data());
    decode(t, bytes.data(), 0, count, split.data());
    for (uint64_t i = 0; i < count; ++i) {
      ASSERT_NEAR(static_cast<double>(split[i]), exact[i], 0x1p-46 * std::fabs(exact[i])) << i;
      const float rounded = static_cast<float>(exact[i]);  // hi is it or a neighbour
      ASSERT_LE(std::fabs(split[i].hi - rounded),
                std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded))
          << i;
    }
  }
}

TEST(Decode, FourBitTypesPackLowNibbleFirstFromAnyOffset) {
  for (DType dtype : {DType::kSFixed4, DType::kUFixed4}) {
    const bool is_signed = dtype == DType::kSFixed4;
    std::vector<int> values(37);
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = is_signed ? static_cast<int>(i % 16) - 8 : static_cast<int>(i % 16);
    }
    const std::vector<uint8_t> bytes = pack_nibbles(values);
    for (bool quantized : {false, true}) {
      TensorRecord t = tensor_record("t", dtype, {values.size()});
      if (quantized) quantize(t, {0.5}, {is_signed ? 1 : -8}, QuantConvention::kQnnOffset);
      for (uint64_t first : {0u, 1u, 2u, 5u, 36u}) {
        for (uint64_t count : {0u, 1u, 2u, 3u, 8u}) {
          if (first + count > values.size()) continue;
          std::vector<float> out(count + 1, -999.0f);
          const DecodeCounts counts = decode(t, bytes.data() + first / 2, first, count, out.data());
          uint64_t at_min = 0, at_max = 0;
          for (uint64_t i = 0; i < count; ++i) {
            const int q = values[first + i];
            const double expected = quantized ? t.quant.dequantize(q, 0) : q;
            ASSERT_EQ(out[i], static_cast<float>(expected))
                << info(dtype).name << " first " << first << " i " << i;
            at_min += q == (is_signed ? -8 : 0);
            at_max += q == (is_signed ? 7 : 15);
          }
          EXPECT_EQ(out[count], -999.0f) << "wrote past the run";
          EXPECT_EQ(counts.at_min, at_min);
          EXPECT_EQ(counts.at_max, at_max);
        }
      }
    }
  }
  // Byte 0x9F holds 15 (low) then 9 (high): signed -1 then -7.
  TensorRecord t = tensor_record("t", DType::kSFixed4, {2});
  EXPECT_EQ(decode_all(t, {0x9F}), (std::vector<float>{-1.0f, -7.0f}));
  t.dtype = DType::kUFixed4;
  EXPECT_EQ(decode_all(t, {0x9F}), (std::vector<float>{15.0f, 9.0f}));
}

TEST(Decode, EveryHalfBitPatternIncludingSubnormalsInfAndNan) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  // One byte of padding in front: the bytes need not be aligned.
  std::vector<uint8_t> bytes(1 + all.size() * 2);
  std::memcpy(bytes.data() + 1, all.data(), all.size() * 2);
  const TensorRecord t = tensor_record("t", DType::kFloat16, {all.size()});
  std::vector<float> out(all.size());
  const DecodeCounts counts = decode(t, bytes.data() + 1, 0, all.size(), out.data());
  EXPECT_EQ(counts.saturated(), 0u);
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[h]), std::bit_cast<uint32_t>(reference_half(all[h])))
        << std::hex << h;
  }
  EXPECT_EQ(out[0x0001], std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(out[0x03FF], 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(out[0x0400], std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(out[0x3C00], 1.0f);
  EXPECT_EQ(out[0x7BFF], 65504.0f);
  EXPECT_EQ(out[0x7C00], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[0xFC00], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[0x7E00]));
  EXPECT_TRUE(std::signbit(out[0x8000]));
  EXPECT_EQ(out[0x8000], 0.0f);
}

TEST(Decode, BFloat16IsTheTopHalfOfAFloat) {
  const std::vector<float> values = {1.0f,
                                     -2.5f,
                                     0.0f,
                                     -0.0f,
                                     3.0e38f,
                                     std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN(),
                                     std::numeric_limits<float>::denorm_min() * 65536.0f};
  std::vector<uint16_t> raw;
  std::vector<float> expected;
  for (float v : values) {
    const auto top = static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16);
    raw.push_back(top);
    expected.push_back(std::bit_cast<float>(static_cast<uint32_t>(top) << 16));
  }
  const TensorRecord t = tensor_record("t", DType::kBFloat16, {raw.size()});
  const std::vector<float> out = decode_all(t, to_bytes(raw));
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_TRUE(same_float(out[i], expected[i])) << i;
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.5f);
  EXPECT_GT(out[7], 0.0f);  // a subnormal survives
}

TEST(Decode, FloatTypes) {
  const std::vector<float> f32 = {1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                                  -std::numeric_limits<float>::infinity(), 1e-45f};
  TensorRecord t = tensor_record("t", DType::kFloat32, {f32.size()});
  std::vector<float> out = decode_all(t, to_bytes(f32));
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(f32[i])) << i;
  }
  const std::vector<double> f64 = {0.1,
                                   -1e300,
                                   1e-300,
                                   std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   3.0};
  t = tensor_record("t", DType::kFloat64, {f64.size()});
  out = decode_all(t, to_bytes(f64));
  EXPECT_EQ(out[0], 0.1f);
  EXPECT_EQ(out[1], -std::numeric_limits<float>::infinity());  // beyond the float range
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[5], 3.0f);
}

TEST(Decode, BoolIsZeroOrOneAndNeverSaturates) {
  const TensorRecord t = tensor_record("t", DType::kBool8, {4});
  DecodeCounts counts;
  EXPECT_EQ(decode_all(t, {0, 1, 2, 255}, &counts), (std::vector<float>{0, 1, 1, 1}));
  EXPECT_EQ(counts.saturated(), 0u);
}

TEST(Decode, SixtyFourBitExtremes) {
  const std::vector<int64_t> s = {std::numeric_limits<int64_t>::min(), -1, 0,
                                  std::numeric_limits<int64_t>::max()};
  TensorRecord t = tensor_record("t", DType::kInt64, {s.size()});
  DecodeCounts counts;
  std::vector<float> out = decode_all(t, to_bytes(s), &counts);
  EXPECT_EQ(out[0], -0x1p63f);
  EXPECT_EQ(out[3], 0x1p63f);
  EXPECT_EQ(counts.at_min, 1u);
  EXPECT_EQ(counts.at_max, 1u);
  const std::vector<uint64_t> u = {0, 5, std::numeric_limits<uint64_t>::max()};
  t = tensor_record("t", DType::kUInt64, {u.size()});
  out = decode_all(t, to_bytes(u), &counts);
  EXPECT_EQ(out[1], 5.0f);
  EXPECT_EQ(out[2], 0x1p64f);
  EXPECT_EQ(counts.at_min, 1u);
  EXPECT_EQ(counts.at_max, 1u);
}

TEST(Decode, SaturationUsesANarrowerBitwidth) {
  // 4-bit values stored in INT_8: -8 and 7 saturate; values beyond (malformed) count too.
  TensorRecord t = tensor_record("t", DType::kSFixed8, {7});
  quantize(t, {1.0}, {0}, QuantConvention::kQnnOffset);
  t.quant.bitwidth = 4;
  const std::vector<int8_t> values = {-8, 7, 0, -7, 6, -9, 100};
  DecodeCounts counts;
  decode_all(t, to_bytes(values), &counts);
  EXPECT_EQ(counts.at_min, 2u);  // -8 and -9
  EXPECT_EQ(counts.at_max, 2u);  // 7 and 100
  EXPECT_EQ(counts.saturated(), 4u);
  // 12 bits in UINT_16: 0 and 4095. The long run exercises the vector counting.
  TensorRecord u = tensor_record("t", DType::kUFixed16, {5000});
  quantize(u, {0.1}, {0}, QuantConvention::kQnnOffset);
  u.quant.bitwidth = 12;
  std::vector<uint16_t> raw(5000);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint16_t>(i % 4096);
  decode_all(u, to_bytes(raw), &counts);
  EXPECT_EQ(counts.at_min, 2u);  // 0 at 0 and 4096
  EXPECT_EQ(counts.at_max, 1u);  // 4095
  // Long uint8 runs: counters flushed before their 8-bit lanes could wrap.
  TensorRecord b = tensor_record("t", DType::kUFixed8, {100000});
  quantize(b, {0.1}, {0}, QuantConvention::kQnnOffset);
  std::vector<uint8_t> full(100000, 255);
  for (size_t i = 0; i < full.size(); i += 3) full[i] = 0;
  decode_all(b, full, &counts);
  EXPECT_EQ(counts.at_min, 33334u);
  EXPECT_EQ(counts.at_max, 66666u);
}

// Per-axis: long channel runs (axis 0), short runs (axis 1 of 3), the last axis; both conventions;
// runs starting anywhere.
TEST(Decode, PerAxisBothConventionsFromAnyOffset) {
  struct Case {
    std::vector<uint64_t> dims;
    int32_t axis;
  };
  const Case cases[] = {{{3, 40}, 0}, {{2, 3, 4}, 1}, {{5, 6}, 1}, {{4, 2, 20}, 1}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    for (QuantConvention convention : {QuantConvention::kQnnOffset, QuantConvention::kZeroPoint}) {
      TensorRecord t = tensor_record("t", DType::kUFixed8, c.dims);
      const uint64_t channels = c.dims[static_cast<size_t>(c.axis)];
      std::vector<double> scales;
      std::vector<int64_t> offsets;
      for (uint64_t k = 0; k < channels; ++k) {
        scales.push_back(0.01 * static_cast<double>(k + 1));
        offsets.push_back(static_cast<int64_t>(k * 7) - 10);
      }
      quantize(t, scales, offsets, convention, c.axis);
      const uint64_t n = t.element_count();
      std::vector<uint8_t> raw(n);
      for (auto& v : raw) v = static_cast<uint8_t>(rng());
      for (uint64_t first = 0; first < n; first += 7) {
        const uint64_t count = std::min<uint64_t>(n - first, 23);
        std::vector<float> out(count);
        decode(t, raw.data() + first, first, count, out.data());
        std::vector<uint32_t> ids(count);
        channels_of(t, first, count, ids.data());
        for (uint64_t i = 0; i < count; ++i) {
          const uint64_t channel = channel_of(t, first + i);
          ASSERT_EQ(ids[i], channel);
          ASSERT_EQ(out[i], static_cast<float>(t.quant.dequantize(raw[first + i], channel)))
              << "dims " << c.dims.size() << " axis " << c.axis << " element " << first + i;
        }
      }
    }
  }
}

TEST(Decode, PerAxisFourBitFromAnOddOffset) {
  TensorRecord t = tensor_record("t", DType::kSFixed4, {3, 5});
  quantize(t, {0.5, 0.25, 2.0}, {0, 1, -1}, QuantConvention::kZeroPoint, 0);
  std::vector<int> values(15);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int>(i % 16) - 8;
  const std::vector<uint8_t> bytes = pack_nibbles(values);
  const uint64_t first = 3;
  std::vector<float> out(11);
  const DecodeCounts counts = decode(t, bytes.data() + first / 2, first, out.size(), out.data());
  for (uint64_t i = 0; i < out.size(); ++i) {
    const uint64_t element = first + i;
    ASSERT_EQ(out[i], static_cast<float>(t.quant.dequantize(values[element], element / 5))) << i;
  }
  EXPECT_EQ(counts.saturated(), 0u);  // elements 3..13 hold -5..5; -8 is element 0
}

TEST(Decode, ChannelOf) {
  TensorRecord t = tensor_record("t", DType::kUFixed8, {2, 3, 4});
  EXPECT_EQ(channel_of(t, 17), 0u);  // per-tensor
  quantize(t, {1, 1, 1}, {0, 0, 0}, QuantConvention::kQnnOffset, 1);
  EXPECT_EQ(channel_of(t, 0), 0u);
  EXPECT_EQ(channel_of(t, 4), 1u);
  EXPECT_EQ(channel_of(t, 11), 2u);
  EXPECT_EQ(channel_of(t, 12), 0u);
  EXPECT_EQ(channel_of(t, 23), 2u);
  quantize(t, {1, 1, 1, 1}, {0, 0, 0, 0}, QuantConvention::kQnnOffset, 2);
  EXPECT_EQ(channel_of(t, 5), 1u);
  EXPECT_EQ(channel_of(t, 23), 3u);
}

TEST(Decode, EmptyRunsAndEmptyTensors) {
  TensorRecord t = tensor_record("t", DType::kUFixed8, {3, 0});
  quantize(t, {0.1, 0.2, 0.3}, {0, 0, 0}, QuantConvention::kQnnOffset, 0);
  float out = -1;
  EXPECT_EQ(decode(t, nullptr, 0, 0, &out).saturated(), 0u);
  EXPECT_EQ(out, -1);
  EXPECT_EQ(channel_of(t, 0), 0u);
  channels_of(t, 0, 0, nullptr);
  for (DType dtype : {DType::kFloat16, DType::kFloat32, DType::kSFixed4, DType::kInt64}) {
    EXPECT_EQ(decode(tensor_record("t", dtype, {0}), nullptr, 0, 0, &out).saturated(), 0u);
  }
}

// Decodes elements [first, first + count) of t with the kernels of `isa`, as Out.
template <class Out>
std::vector<Out> decode_with(kernels::Isa isa, const TensorRecord& t,
                             const std::vector<uint8_t>& bytes, uint64_t first, uint64_t count,
                             DecodeCounts& counts) {
  const kernels::ScopedIsaForTesting scope(isa);
  std::vector<Out> out(count);
  counts = decode(t, bytes.data() + first * (info(t.dtype).bits / 8), first, count, out.data());
  return out;
}

template <class Out>
void expect_same_decoding(const TensorRecord& t, const std::vector<uint8_t>& bytes, uint64_t first,
                          uint64_t count) {
  DecodeCounts baseline_counts, avx2_counts;
  const std::vector<Out> baseline =
      decode_with<Out>(kernels::Isa::kBaseline, t, bytes, first, count, baseline_counts);
  const std::vector<Out> avx2 =
      decode_with<Out>(kernels::Isa::kAvx2, t, bytes, first, count, avx2_counts);
  EXPECT_EQ(baseline_counts.at_min, avx2_counts.at_min);
  EXPECT_EQ(baseline_counts.at_max, avx2_counts.at_max);
  EXPECT_TRUE(count < 100 || baseline_counts.saturated() > 0);  // the ends are there
  for (uint64_t i = 0; i < count; ++i) {
    ASSERT_EQ(std::memcmp(&baseline[i], &avx2[i], sizeof(Out)), 0)
        << "element " << first + i << ": " << static_cast<double>(baseline[i]) << " vs "
        << static_cast<double>(avx2[i]);
  }
}

// A run of the zero code is what decoding gives it: +0 in both floats of every Split, nothing
// counted, on every instruction set (the comparator skips decoding such runs).
void expect_zero_code_decodes_to_zeros(const TensorRecord& t) {
  const std::optional<uint16_t> code = split_zero_code(t);
  ASSERT_TRUE(code) << info(t.dtype).name;
  const unsigned width = info(t.dtype).bits / 8;
  constexpr uint64_t kCount = 8192 + 37;
  std::vector<uint8_t> bytes(kCount * width);
  for (uint64_t i = 0; i < kCount; ++i) {
    bytes[i * width] = static_cast<uint8_t>(*code);
    if (width == 2) bytes[i * width + 1] = static_cast<uint8_t>(*code >> 8);
  }
  for (kernels::Isa isa : {kernels::Isa::kBaseline, kernels::Isa::kAvx2}) {
    if (!kernels::supported(isa)) continue;
    for (uint64_t first : {uint64_t{0}, uint64_t{5}}) {
      DecodeCounts counts;
      const std::vector<Split> out =
          decode_with<Split>(isa, t, bytes, first, kCount - first, counts);
      EXPECT_EQ(counts.saturated(), 0u);
      for (const Split& v : out) {
        ASSERT_EQ(std::bit_cast<uint32_t>(v.hi), 0u);
        ASSERT_EQ(std::bit_cast<uint32_t>(v.lo), 0u);
      }
    }
  }
}

TEST(Decode, TheZeroCodeDecodesToZeros) {
  const auto tensor = [](DType dtype, double scale, int64_t offset, QuantConvention convention) {
    TensorRecord t = tensor_record("t", dtype, {8192 + 37});
    quantize(t, {scale}, {offset}, convention);
    return t;
  };
  expect_zero_code_decodes_to_zeros(
      tensor(DType::kSFixed16, 1.0 / 5461, 0, QuantConvention::kQnnOffset));
  expect_zero_code_decodes_to_zeros(
      tensor(DType::kSFixed16, 0.37, 1234, QuantConvention::kQnnOffset));
  expect_zero_code_decodes_to_zeros(
      tensor(DType::kUFixed16, 0.01, -40000, QuantConvention::kQnnOffset));
  expect_zero_code_decodes_to_zeros(tensor(DType::kUFixed8, 0.1, -89, QuantConvention::kQnnOffset));
  expect_zero_code_decodes_to_zeros(tensor(DType::kSFixed8, 0.1, -3, QuantConvention::kQnnOffset));
  expect_zero_code_decodes_to_zeros(tensor(DType::kUInt8, 0.1, 128, QuantConvention::kZeroPoint));
  expect_zero_code_decodes_to_zeros(tensor(DType::kInt16, 1e-3, -7, QuantConvention::kZeroPoint));
  const std::optional<uint16_t> code =
      split_zero_code(tensor(DType::kSFixed8, 0.1, -3, QuantConvention::kQnnOffset));
  EXPECT_EQ(code, std::optional<uint16_t>(3));
  EXPECT_EQ(split_zero_code(tensor(DType::kSFixed16, 0.1, 5, QuantConvention::kQnnOffset)),
            std::optional<uint16_t>(0xFFFB));  // -5, as stored
}

TEST(Decode, NoZeroCodeWhereDecodingMustRun) {
  const auto tensor = [](DType dtype, int64_t offset) {
    TensorRecord t = tensor_record("t", dtype, {64});
    quantize(t, {0.1}, {offset}, QuantConvention::kQnnOffset);
    return t;
  };
  EXPECT_FALSE(split_zero_code(tensor(DType::kUFixed8, 0)));    // zero at the range's end
  EXPECT_FALSE(split_zero_code(tensor(DType::kSFixed8, 128)));  // at the end (-128)
  EXPECT_FALSE(split_zero_code(tensor(DType::kUFixed8, 300)));  // off the codes
  EXPECT_FALSE(split_zero_code(tensor(DType::kSFixed4, 0)));    // packed
  EXPECT_FALSE(split_zero_code(tensor_record("t", DType::kInt16, {64})));  // not quantized
  TensorRecord per_axis = tensor_record("t", DType::kSFixed8, {2, 32});
  quantize(per_axis, {0.1, 0.2}, {0, 0}, QuantConvention::kQnnOffset, 0);
  EXPECT_FALSE(split_zero_code(per_axis));
}

// Raw values of `width` bytes, one in four at or near an end of the range.
std::vector<uint8_t> raw_values(uint64_t count, unsigned width, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes(count * width);
  const uint16_t ends[] = {0x0000, 0x7FFF, 0x8000, 0xFFFF, 0x0007, 0xFFF8, 0x000F, 0x007F, 0xFF80};
  for (uint64_t i = 0; i < count; ++i) {
    const auto v = rng() % 4 == 0 ? ends[rng() % 9] : static_cast<uint16_t>(rng());
    bytes[i * width] = static_cast<uint8_t>(v);
    if (width == 2) bytes[i * width + 1] = static_cast<uint8_t>(v >> 8);
  }
  return bytes;
}

// 8- and 16-bit values, per tensor and per axis, decode to the same floats, doubles, Splits and
// counts with every instruction set: lengths around the AVX2 kernel's 32-byte steps and its
// counters' flushes (255 and 4096 steps), starts anywhere, both conventions, a narrowed saturation
// range, many values at the ends.
TEST(Decode, EveryInstructionSetDecodesBytesBitIdentically) {
  if (!kernels::supported(kernels::Isa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937_64 rng(29);
  for (DType dtype : {DType::kSFixed8, DType::kUFixed8, DType::kInt8, DType::kUInt8,
                      DType::kSFixed16, DType::kUFixed16, DType::kInt16, DType::kUInt16}) {
    const unsigned width = info(dtype).bits / 8;
    for (uint64_t length :
         {1u, 5u, 15u, 16u, 17u, 31u, 32u, 33u, 100u, 1023u, 1024u, 8160u, 8161u, 30000u, 65537u}) {
      if (width == 1 && length == 65537u) continue;
      const std::vector<uint8_t> bytes = raw_values(3 * length, width, rng);
      TensorRecord per_tensor = tensor_record("t", dtype, {3 * length});
      quantize(per_tensor, {1.0 / 3.0 + 1e-12}, {-37}, QuantConvention::kQnnOffset);
      TensorRecord narrow = per_tensor;  // saturation range -8..7 or 0..15
      quantize(narrow, {0.02}, {5}, QuantConvention::kZeroPoint);
      narrow.quant.bitwidth = 4;
      TensorRecord per_axis = tensor_record("t", dtype, {3, length});
      quantize(per_axis, {0.1, 1.0 / 7.0, 3e-5}, {-5, 0, 120}, QuantConvention::kQnnOffset, 0);
      for (const TensorRecord* t : {&per_tensor, &narrow, &per_axis}) {
        for (uint64_t first : {uint64_t{0}, length / 3 + 1}) {
          SCOPED_TRACE(::testing::Message()
                       << info(dtype).name << " length " << length << " first " << first
                       << " bitwidth " << int{t->quant.bitwidth} << " axis " << t->quant.axis);
          expect_same_decoding<float>(*t, bytes, first, 3 * length - first);
          expect_same_decoding<double>(*t, bytes, first, 3 * length - first);
          expect_same_decoding<Split>(*t, bytes, first, 3 * length - first);
        }
      }
    }
  }
}

}  // namespace
}  // namespace qd::compare
