// The encoding lint (base/include/qnn_debug/base/encoding_lint.h): what cannot be a real encoding
// for its dtype, with the bounds worked out by hand.
#include "qnn_debug/base/encoding_lint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace qd {
namespace {

TensorRecord quantized(DType dtype, std::vector<double> scales, std::vector<int64_t> offsets,
                       uint8_t bitwidth = 0) {
  TensorRecord r;
  r.name = "t";
  r.dtype = dtype;
  r.dims = {1, scales.size()};
  r.quant.scales = std::move(scales);
  r.quant.offsets = std::move(offsets);
  r.quant.axis = r.quant.scales.size() > 1 ? 1 : -1;
  r.quant.bitwidth = bitwidth;
  return r;
}

std::vector<EncodingProblem> problems(const TensorRecord& r) {
  std::vector<EncodingProblem> out;
  for (const EncodingFinding& finding : lint_encoding(r)) out.push_back(finding.problem);
  return out;
}

using P = EncodingProblem;
using Problems = std::vector<EncodingProblem>;

TEST(EncodingLint, SoundEncodingsPass) {
  EXPECT_TRUE(lint_encoding(quantized(DType::kUFixed8, {0.02}, {-128})).empty());
  EXPECT_TRUE(lint_encoding(quantized(DType::kSFixed16, {3e-5}, {0})).empty());
  // INT_32 bias: input scale x weight scale. 1e-14 x (2^32 - 1) = 4.3e-5 of range: normal.
  EXPECT_TRUE(lint_encoding(quantized(DType::kSFixed32, {1e-14}, {0})).empty());
  EXPECT_TRUE(lint_encoding(quantized(DType::kInt32, {1e-14}, {0})).empty());
}

TEST(EncodingLint, NothingToLintWithoutQuantization) {
  TensorRecord r;
  r.dtype = DType::kFloat32;
  EXPECT_TRUE(lint_encoding(r).empty());
  r.dtype = DType::kInt32;  // plain integers (indices) need no encoding
  EXPECT_TRUE(lint_encoding(r).empty());
  r.dtype = DType::kSFixed8;  // fixed point means quantized: without an encoding it means nothing
  EXPECT_EQ(problems(r), (Problems{P::kMissing}));
}

TEST(EncodingLint, ScalesThatAreNoScale) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {nan}, {0})), (Problems{P::kScaleNotFinite}));
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {-inf}, {0})), (Problems{P::kScaleNotFinite}));
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {0.0}, {0})), (Problems{P::kScaleNotPositive}));
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {-0.1}, {0})), (Problems{P::kScaleNotPositive}));
}

TEST(EncodingLint, UncalibratedConverterEncodingsOverflow) {
  // min/max of +-1e38 over 255 steps: scale 7.8e35, offset -128 -> values up to ~1e38.
  const double scale = 2e38 / 255;
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {scale}, {-128})), (Problems{P::kRangeOverflow}));
  // The bound is on the real value, so it depends on the width: 1e26 x 255 stays below 1e30,
  // 1e26 x 65535 does not.
  EXPECT_TRUE(lint_encoding(quantized(DType::kUFixed8, {1e26}, {0})).empty());
  EXPECT_EQ(problems(quantized(DType::kUFixed16, {1e26}, {0})), (Problems{P::kRangeOverflow}));
  // An offset far outside the integer range pushes the values out too.
  EXPECT_EQ(problems(quantized(DType::kSFixed8, {1e26}, {-100000})), (Problems{P::kRangeOverflow}));
}

TEST(EncodingLint, RangesTooNarrowToMeanAnything) {
  // 8-bit: 1e-11 x 255 = 2.55e-9 < 1e-8. 16-bit: 1e-11 x 65535 = 6.6e-7, fine.
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {1e-11}, {0})), (Problems{P::kRangeCollapsed}));
  EXPECT_TRUE(lint_encoding(quantized(DType::kUFixed16, {1e-11}, {0})).empty());
  // A 4-bit encoding in an 8-bit container spans 15 steps, not 255: 5e-10 x 15 = 7.5e-9 < 1e-8,
  // while 5e-10 x 255 = 1.3e-7 is fine.
  EXPECT_TRUE(lint_encoding(quantized(DType::kUFixed8, {5e-10}, {0})).empty());
  EXPECT_EQ(problems(quantized(DType::kUFixed8, {5e-10}, {0}, 4)), (Problems{P::kRangeCollapsed}));
}

TEST(EncodingLint, PerAxisFindingsCountChannels) {
  const TensorRecord r = quantized(DType::kSFixed8, {0.1, 0.0, 0.2, -1.0, 1e36}, {0, 0, 0, 0, 0});
  const std::vector<EncodingFinding> findings = lint_encoding(r);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].problem, P::kScaleNotPositive);
  EXPECT_EQ(findings[0].channels, 2u);
  EXPECT_EQ(findings[0].channel, 1u);
  EXPECT_EQ(findings[0].scale, 0.0);
  EXPECT_EQ(findings[1].problem, P::kRangeOverflow);
  EXPECT_EQ(findings[1].channel, 4u);
  EXPECT_EQ(describe(findings[0]), "scale_not_positive (scale 0 in 2 channels, first channel 1)");
  EXPECT_EQ(describe(findings[1]), "range_overflow (scale 1e+36 in 1 channel, first channel 4)");
}

TEST(EncodingLint, ZeroPointConventionIsRespected) {
  // real = (q - zp) * scale: a zero point of +100000 is as far out as a QNN offset of -100000.
  TensorRecord r = quantized(DType::kSFixed8, {1e26}, {100000});
  r.quant.convention = QuantConvention::kZeroPoint;
  EXPECT_EQ(problems(r), (Problems{P::kRangeOverflow}));
}

TEST(EncodingLint, ProblemNames) {
  EXPECT_EQ(encoding_problem_name(P::kMissing), "missing_encoding");
  EXPECT_EQ(encoding_problem_name(P::kScaleNotFinite), "scale_not_finite");
  EXPECT_EQ(encoding_problem_name(P::kScaleNotPositive), "scale_not_positive");
  EXPECT_EQ(encoding_problem_name(P::kRangeOverflow), "range_overflow");
  EXPECT_EQ(encoding_problem_name(P::kRangeCollapsed), "range_collapsed");
}

}  // namespace
}  // namespace qd
