// The measurements behind the hints (compare/explain.h), on values whose answers are known.
#include "qnn_debug/compare/explain.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace qd::compare {
namespace {

TensorRecord uint8_tensor(double scale, int64_t offset) {
  TensorRecord t;
  t.dtype = DType::kUFixed8;
  t.dims = {4};
  t.quant.scales = {scale};
  t.quant.offsets = {offset};
  return t;
}

TEST(Explain, SqnrIsOverFinitePairsInDouble) {
  const std::vector<float> ref = {1, 2, NAN, 2};
  const std::vector<float> dev = {1, 2.5f, 7, 1.5f};
  EXPECT_NEAR(sqnr_db(ref, dev), 10 * std::log10(9.0 / 0.5), 1e-12);
  EXPECT_TRUE(std::isinf(sqnr_db(ref, ref)));
}

// uint8 over [-1, 3]: 255 steps of 4/255, and raw 0 stands for -1 (offset -63.75, rounded).
TEST(Explain, AFittedEncodingCoversTheRangeWithZeroInIt) {
  const FittedEncoding fit = fit_encoding(-1, 3, uint8_tensor(1, 0));
  EXPECT_DOUBLE_EQ(fit.min, -1);
  EXPECT_DOUBLE_EQ(fit.max, 3);
  EXPECT_DOUBLE_EQ(fit.scale, 4.0 / 255);
  EXPECT_EQ(fit.offset, -64);
  EXPECT_EQ(fit.bitwidth, 8);
  EXPECT_FALSE(fit.is_signed);
  const FittedEncoding positive = fit_encoding(2, 5, uint8_tensor(1, 0));
  EXPECT_DOUBLE_EQ(positive.min, 0);  // widened to hold 0.0
  EXPECT_EQ(positive.offset, 0);
}

TEST(Explain, TheEncodingsEvidence) {
  // Encoding: scale 0.1, offset -10: raw 0..255 is [-1.0, 24.5].
  const TensorRecord device = uint8_tensor(0.1, -10);
  const std::vector<float> ref = {-2.0f, 0.0f, 0.25f, 30.0f};
  const std::vector<float> dev = {-1.0f, 0.0f, 0.2f, 24.5f};
  const EncodingEvidence ev = examine_encoding(ref, dev, device, {}, 20);
  EXPECT_DOUBLE_EQ(ev.below_fraction, 0.25);
  EXPECT_DOUBLE_EQ(ev.above_fraction, 0.25);
  // Unclipped: 0 and 0.25 (device 0.2): SQNR 10 log10(0.0625 / 0.0025).
  EXPECT_NEAR(ev.sqnr_without_clipped_db, 10 * std::log10(0.0625 / 0.0025), 1e-5);
  EXPECT_NEAR(ev.range_fraction, 32.0 / 25.5, 1e-12);
  // The ideal quantization clamps -2 to -1 and 30 to 24.5, rounds 0.25 to 0.2 (half to even).
  const double ideal_noise = 1.0 + 0 + 0.05 * 0.05 + 5.5 * 5.5;
  EXPECT_NEAR(ev.ideal_sqnr_db, 10 * std::log10((4 + 0.0625 + 900) / ideal_noise), 1e-5);
  EXPECT_DOUBLE_EQ(ev.fitted.min, -2);
  EXPECT_DOUBLE_EQ(ev.fitted.max, 30);
  EXPECT_GT(ev.fitted_sqnr_db, 30);
  EXPECT_FALSE(ev.wider) << "the fitted 8 bits reach the policy's 20 dB";

  // A policy that passes only above what 8 bits can give: the same range at 16 bits, on the same
  // unsigned grid, and the SQNR it allows (each step 256 times finer: about 48 dB more).
  const EncodingEvidence strict = examine_encoding(ref, dev, device, {}, 200);
  ASSERT_TRUE(strict.wider);
  const FittedEncoding& wide = strict.wider->encoding;
  EXPECT_EQ(wide.bitwidth, 16);
  EXPECT_FALSE(wide.is_signed);
  EXPECT_DOUBLE_EQ(wide.scale, 32.0 / 65535);
  EXPECT_EQ(wide.offset, -4096);  // round(-2 / scale)
  EXPECT_GT(strict.wider->sqnr_db, strict.fitted_sqnr_db + 30);
  EXPECT_DOUBLE_EQ(strict.fitted_sqnr_db, ev.fitted_sqnr_db);
}

// [N=1, C=2, H=2, W=3] with H and W swapped in the data: the "H and W swapped" trial recovers it.
TEST(Explain, ALayoutTrialUndoesASwapOfHAndW) {
  const std::vector<uint64_t> dims = {1, 2, 2, 3};
  std::vector<float> ref(12);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<float>(i + 1);
  std::vector<float> swapped(12);  // written as [1, 2, 3, 2]
  for (size_t c = 0; c < 2; ++c) {
    for (size_t h = 0; h < 2; ++h) {
      for (size_t w = 0; w < 3; ++w) swapped[c * 6 + w * 2 + h] = ref[c * 6 + h * 3 + w];
    }
  }
  const std::vector<LayoutTrial> trials = try_layouts(ref, swapped, dims, -1);
  ASSERT_FALSE(trials.empty());
  EXPECT_EQ(trials[0].permutation, "H and W swapped");
  EXPECT_TRUE(std::isinf(trials[0].sqnr_db));
  for (size_t i = 1; i < trials.size(); ++i) EXPECT_FALSE(std::isinf(trials[i].sqnr_db));
  // Channels reversed along axis 1.
  std::vector<float> reversed(12);
  for (size_t i = 0; i < 6; ++i) reversed[i] = ref[i + 6], reversed[i + 6] = ref[i];
  const std::vector<LayoutTrial> channel = try_layouts(ref, reversed, dims, -1);
  EXPECT_EQ(channel.at(0).permutation, "channels reversed (axis 1)");
  EXPECT_TRUE(std::isinf(channel.at(0).sqnr_db));
}

}  // namespace
}  // namespace qd::compare
