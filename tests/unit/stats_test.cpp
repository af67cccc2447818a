#include "tensor_stats.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../common/records.h"

namespace qd {
namespace {

using testing::tensor_record;

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(TensorStats, FloatSkipsNanAndInfButCountsThem) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {1.5f, nan, -2.0f, inf, 4.5f, -inf};
  const auto bytes = bytes_of(values);
  const TensorStats s = compute_stats(tensor_record("t", DType::kFloat32, {6}), bytes.data());
  EXPECT_DOUBLE_EQ(s.min, -2.0);
  EXPECT_DOUBLE_EQ(s.max, 4.5);
  EXPECT_DOUBLE_EQ(s.mean, 4.0 / 3.0);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.inf_count, 2u);
}

TEST(TensorStats, AllNanOrEmptyHasNanSummary) {
  const std::vector<float> values = {std::nanf("")};
  const auto bytes = bytes_of(values);
  const TensorStats s = compute_stats(tensor_record("t", DType::kFloat32, {1}), bytes.data());
  EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.max) && std::isnan(s.mean));
  EXPECT_EQ(s.nan_count, 1u);
  const TensorStats empty = compute_stats(tensor_record("t", DType::kFloat32, {0}), nullptr);
  EXPECT_TRUE(std::isnan(empty.mean));
  EXPECT_EQ(empty.nan_count, 0u);
}

TEST(TensorStats, LargeFloatMeanIsAccurate) {
  std::vector<float> values(1'000'003);
  double exact = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) + 3.0);
    exact += values[i];
  }
  exact /= static_cast<double>(values.size());
  const auto bytes = bytes_of(values);
  const TensorStats s =
      compute_stats(tensor_record("t", DType::kFloat32, {values.size()}), bytes.data());
  EXPECT_NEAR(s.mean, exact, 1e-6 * exact);
}

TEST(TensorStats, PerTensorQuantizedStatsAreRealValues) {
  TensorRecord r = tensor_record("t", DType::kSFixed8, {4});
  r.quant.scales = {0.5};
  r.quant.offsets = {-10};  // QNN: real = (q - 10) * 0.5
  const std::vector<int8_t> q = {-128, 10, 20, 127};
  const auto bytes = bytes_of(q);
  TensorStats s = compute_stats(r, bytes.data());
  EXPECT_DOUBLE_EQ(s.min, (-128 - 10) * 0.5);
  EXPECT_DOUBLE_EQ(s.max, (127 - 10) * 0.5);
  EXPECT_DOUBLE_EQ(s.mean, ((-128 + 10 + 20 + 127) / 4.0 - 10) * 0.5);

  r.quant.convention = QuantConvention::kZeroPoint;  // real = (q + 10) * 0.5
  s = compute_stats(r, bytes.data());
  EXPECT_DOUBLE_EQ(s.min, (-128 + 10) * 0.5);
  EXPECT_DOUBLE_EQ(s.max, (127 + 10) * 0.5);
}

TEST(TensorStats, PerAxisQuantizationUsesEachChannelsScale) {
  TensorRecord r = tensor_record("t", DType::kInt16, {2, 2, 2});  // axis 1: channel = (i / 2) % 2
  r.quant.axis = 1;
  r.quant.scales = {1.0, 100.0};
  r.quant.offsets = {0, 0};
  const std::vector<int16_t> q = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto bytes = bytes_of(q);
  const TensorStats s = compute_stats(r, bytes.data());
  // channel 0: 1,2,5,6 ; channel 1: 300,400,700,800
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 800.0);
  EXPECT_DOUBLE_EQ(s.mean, (1 + 2 + 5 + 6 + 300 + 400 + 700 + 800) / 8.0);
}

// No elements, but 2^40 leading rows of 2 channels: the per-channel walk used to visit every
// (empty) row, 2^41 steps, hanging the capture hook's writer thread. Found by the diff fuzzer.
// The alarm turns a hang back into a failure.
TEST(TensorStats, AnEmptyPerAxisTensorWithHugeDimsReturnsAtOnce) {
  TensorRecord r = tensor_record("t", DType::kInt8, {uint64_t{1} << 40, 2, 0});
  r.quant.axis = 1;
  r.quant.scales = {1.0, 2.0};
  r.quant.offsets = {0, 0};
  alarm(20);
  const TensorStats s = compute_stats(r, nullptr);
  alarm(0);
  EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.max) && std::isnan(s.mean));
  EXPECT_EQ(s.nan_count, 0u);
}

TEST(TensorStats, FourBitValuesUnpackLowNibbleFirst) {
  TensorRecord r = tensor_record("t", DType::kSFixed4, {3});
  const std::vector<uint8_t> packed = {0x8F, 0x07};  // -1, -8, 7
  TensorStats s = compute_stats(r, packed.data());
  EXPECT_DOUBLE_EQ(s.min, -8);
  EXPECT_DOUBLE_EQ(s.max, 7);
  EXPECT_DOUBLE_EQ(s.mean, -2.0 / 3.0);
  r.dtype = DType::kUFixed4;
  s = compute_stats(r, packed.data());
  EXPECT_DOUBLE_EQ(s.min, 7);
  EXPECT_DOUBLE_EQ(s.max, 15);
}

TEST(TensorStats, HalfAndBfloat16Decode) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(half_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xC0A0), -5.0f);

  const std::vector<uint16_t> halves = {0x3C00, 0x7C00, 0xC000};
  const auto bytes = bytes_of(halves);
  const TensorStats s = compute_stats(tensor_record("t", DType::kFloat16, {3}), bytes.data());
  EXPECT_DOUBLE_EQ(s.min, -2.0);
  EXPECT_DOUBLE_EQ(s.max, 1.0);
  EXPECT_EQ(s.inf_count, 1u);
}

TEST(TensorStats, WideIntegersAndDoubles) {
  const std::vector<int64_t> big = {-(int64_t{1} << 40), 5};
  auto bytes = bytes_of(big);
  TensorStats s = compute_stats(tensor_record("t", DType::kInt64, {2}), bytes.data());
  EXPECT_DOUBLE_EQ(s.min, -std::ldexp(1.0, 40));
  const std::vector<double> doubles = {0.25, std::nan(""), 0.75};
  bytes = bytes_of(doubles);
  s = compute_stats(tensor_record("t", DType::kFloat64, {3}), bytes.data());
  EXPECT_DOUBLE_EQ(s.mean, 0.5);
  EXPECT_EQ(s.nan_count, 1u);
}

// Narrow integers are summed in 32-bit lanes over blocks: at the extremes of every 8- and 16-bit
// type, over many blocks and a ragged tail, min, max and the mean stay exact.
template <typename T>
void expect_exact_narrow_stats(DType dtype) {
  const size_t n = 3 * 4096 + 123;
  std::vector<T> values(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    values[i] = (i % 5 == 0) ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    sum += static_cast<double>(values[i]);
  }
  const auto bytes = bytes_of(values);
  const TensorStats s = compute_stats(tensor_record("t", dtype, {n}), bytes.data());
  EXPECT_EQ(s.min, static_cast<double>(std::numeric_limits<T>::min())) << info(dtype).name;
  EXPECT_EQ(s.max, static_cast<double>(std::numeric_limits<T>::max())) << info(dtype).name;
  EXPECT_DOUBLE_EQ(s.mean, sum / static_cast<double>(n)) << info(dtype).name;
}

TEST(TensorStats, NarrowIntegersAtTheirLimitsAreExact) {
  expect_exact_narrow_stats<int8_t>(DType::kInt8);
  expect_exact_narrow_stats<uint8_t>(DType::kUInt8);
  expect_exact_narrow_stats<int16_t>(DType::kInt16);
  expect_exact_narrow_stats<uint16_t>(DType::kUInt16);
  expect_exact_narrow_stats<int32_t>(DType::kInt32);
}

}  // namespace
}  // namespace qd
