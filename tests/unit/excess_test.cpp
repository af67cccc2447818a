// What the encoding allows (compare/excess.h, compare/src/ideal_noise.h): the ideal SQNR of a
// reference on a device encoding, computed beside the metrics, and the op's own excess error,
// each against a direct float64 computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ideal_noise.h"
#include "kernel_dispatch.h"
#include "qnn_debug/compare/excess.h"
#include "qnn_debug/compare/metrics.h"

namespace qd::compare {
namespace {

double n_of(double db) { return std::pow(10.0, -db / 10); }

TEST(Excess, TotalIsWhatTheInputAndTheEncodingDoNotAccountFor) {
  // The int16 decoder's position fault: 11.5 dB where the input carries 58 dB and the encoding
  // allows 61.7 dB.
  ExcessInputs in;
  in.sqnr_db = 11.5;
  in.input_sqnr_db = 58;
  in.ideal_sqnr_db = 61.7;
  const auto e = estimate_excess(in);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, ExcessSource::kTotal);
  const double allowed = n_of(58) + n_of(61.7);
  EXPECT_NEAR(e->allowed_sqnr_db, -10 * std::log10(allowed), 1e-12);
  EXPECT_NEAR(e->excess_db, e->allowed_sqnr_db - 11.5, 1e-9);
  const double own = n_of(11.5) - allowed;
  EXPECT_NEAR(e->excess_noise_ratio, std::sqrt(own / n_of(61.7)), 1e-9);
  EXPECT_GT(e->excess_noise_ratio, 300);
  EXPECT_NEAR(e->added_noise_db, 10 * std::log10(own), 1e-9);
}

TEST(Excess, AnIdealOpHasNone) {
  ExcessInputs in;
  in.input_sqnr_db = 30;
  in.ideal_sqnr_db = 40;
  in.sqnr_db = -10 * std::log10(n_of(30) + n_of(40));  // exactly what the two allow
  const auto e = estimate_excess(in);
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->excess_db, 0, 1e-9);
  EXPECT_NEAR(e->excess_noise_ratio, 0, 1e-6);
  // Better than allowed (an op that averages noise away) is no excess either.
  in.sqnr_db = 35;
  EXPECT_EQ(estimate_excess(in)->excess_db, 0);
}

TEST(Excess, TheReplayAndTheKernelPartAreOwnErrorFirst) {
  ExcessInputs in;
  in.sqnr_db = 20;
  in.input_sqnr_db = 21;
  in.ideal_sqnr_db = 40;
  in.kernel_sqnr_db = 30;
  in.kernel_input_sqnr_db = 33;
  auto e = estimate_excess(in);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, ExcessSource::kKernel);
  EXPECT_NEAR(e->excess_noise_ratio, std::sqrt((n_of(30) - n_of(33)) / n_of(40)), 1e-9);
  in.isolated_sqnr_db = 45;  // the replay measures it: ±1 LSB on a few codes
  e = estimate_excess(in);
  EXPECT_EQ(e->source, ExcessSource::kIsolated);
  EXPECT_NEAR(e->excess_noise_ratio, std::sqrt(n_of(45) / n_of(40)), 1e-9);
  EXPECT_NEAR(e->excess_db, 10 * std::log10(1 + n_of(45) / (n_of(21) + n_of(40))), 1e-9);
}

TEST(Excess, NoEncodingNoEstimate) {
  ExcessInputs in;
  in.sqnr_db = 20;
  EXPECT_FALSE(estimate_excess(in));
  in.ideal_sqnr_db = 40;
  in.sqnr_db = std::nan("");
  EXPECT_FALSE(estimate_excess(in));
}

TensorRecord uint8_device(double scale, int64_t offset) {
  TensorRecord t;
  t.name = "dev";
  t.dtype = DType::kUFixed8;
  t.dims = {1024};
  t.quant.scales = {scale};
  t.quant.offsets = {offset};
  return t;
}

TEST(IdealNoise, IsTheReferenceOnTheDeviceGridInDouble) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.2f, 1.0f);
  std::vector<float> r(1024), d(1024, 0.0f);
  for (float& v : r) v = normal(rng);
  r[5] = std::nanf("");  // not a finite pair: left out, as the metrics leave it
  const double scale = 6.0 / 255;
  const int64_t offset = -128;
  IdealNoise ideal(uint8_device(scale, offset), {});
  ASSERT_TRUE(ideal.active());
  ideal.add(r.data(), d.data(), 500, 0);
  IdealNoise rest(uint8_device(scale, offset), {});
  rest.add(r.data() + 500, d.data() + 500, 524, 500);
  ideal.merge(rest);
  double signal = 0, noise = 0;
  for (float v : r) {
    if (!std::isfinite(v)) continue;
    const double q = std::clamp(std::nearbyint(double(v) / scale) - double(offset), 0.0, 255.0);
    const double e = (q + double(offset)) * scale - double(v);
    signal += double(v) * double(v);
    noise += e * e;
  }
  ASSERT_TRUE(ideal.sqnr_db());
  EXPECT_NEAR(*ideal.sqnr_db(), 10 * std::log10(signal / noise), 1e-9);
}

TensorRecord int16_device(double scale, int64_t offset) {
  TensorRecord t;
  t.name = "dev";
  t.dtype = DType::kSFixed16;
  t.dims = {1 << 20};
  t.quant.scales = {scale};
  t.quant.offsets = {offset};
  return t;
}

// The sums of a chunk's pieces side by side (add_pieces) against add() piece by piece: the same
// bits, whatever the chunk holds; `fast` says whether the side-by-side path must have run.
void expect_pieces_as_add(const TensorRecord& device, const std::vector<float>& r, uint64_t piece,
                          bool fast) {
  IdealNoise by_piece(device, {}), side_by_side(device, {});
  for (uint64_t at = 0; at < r.size(); at += piece) {
    const uint64_t n = std::min<uint64_t>(piece, r.size() - at);
    by_piece.add(r.data() + at, r.data() + at, n, at);
  }
  const bool ran = side_by_side.add_pieces(r.data(), r.size(), 0, piece);
  if (!ran) {  // what the comparator then does
    for (uint64_t at = 0; at < r.size(); at += piece) {
      const uint64_t n = std::min<uint64_t>(piece, r.size() - at);
      side_by_side.add(r.data() + at, r.data() + at, n, at);
    }
  }
  if (kernels::supported(kernels::Isa::kAvx2)) {
    EXPECT_EQ(ran, fast);
  }
  ASSERT_TRUE(by_piece.sqnr_db());
  EXPECT_EQ(*side_by_side.sqnr_db(), *by_piece.sqnr_db());
  side_by_side.merge(by_piece);  // twice the same sums: the same ratio, exactly
  EXPECT_EQ(*side_by_side.sqnr_db(), *by_piece.sqnr_db());
}

TEST(IdealNoise, PiecesSideBySideAreTheSameBitsAsOneByOne) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.1f, 1.5f);
  std::vector<float> r(8 * 8192 + 3000);
  for (float& v : r) v = normal(rng);
  const double scale = 8.0 / 32767;
  expect_pieces_as_add(int16_device(scale, 0), r, 8192, true);
  expect_pieces_as_add(int16_device(scale, 7), r, 1303, true);  // lengths not a multiple of 8
  // Zeros (a KV cache's unwritten slots): whole pieces, and the end of one; then with 0 off the
  // grid (the codes cannot reach it: every zero adds its error).
  std::vector<float> cache = r;
  std::fill(cache.begin() + 8192 + 2048, cache.begin() + 3 * 8192, 0.0f);
  std::fill(cache.begin() + 5 * 8192 + 1, cache.begin() + 6 * 8192, -0.0f);
  expect_pieces_as_add(int16_device(scale, 0), cache, 8192, true);
  expect_pieces_as_add(int16_device(scale, 40000), cache, 8192, true);
  // Zeros across every piece at once, the chains stepping over them, with a NaN (counted lanes).
  std::vector<float> across = r;
  for (uint64_t p = 0; p < 8; ++p) {
    std::fill(across.begin() + p * 8192 + 1000, across.begin() + p * 8192 + 2000, 0.0f);
  }
  across[5000] = std::numeric_limits<float>::quiet_NaN();
  expect_pieces_as_add(int16_device(scale, 0), across, 8192, true);
  // Beyond the encoding's range: the grid clamps.
  expect_pieces_as_add(int16_device(scale / 4, -20000), r, 8192, true);
  r[12345] = std::numeric_limits<float>::quiet_NaN();
  r[20000] = 0;
  expect_pieces_as_add(int16_device(scale, 3), r, 8192, true);  // a NaN is left out
  r[777] = 100.5f / 4096;  // halfway between two codes of 2^-12: not proved, each chain alone
  expect_pieces_as_add(int16_device(1.0 / 4096, 0), r, 8192, true);
  r[777] = 1;
  r[40000] = -std::numeric_limits<float>::max();  // maybe a masked pair: one by one
  expect_pieces_as_add(int16_device(scale, 0), r, 8192, false);
  r[40000] = std::numeric_limits<float>::infinity();  // off any grid: one by one
  expect_pieces_as_add(int16_device(scale, 0), r, 8192, false);
  r[40000] = 2;
  r.resize(7 * 8192);  // fewer than eight pieces: each on its own chain
  expect_pieces_as_add(int16_device(scale, 0), r, 8192, true);
  r.resize(8192);  // a single piece: add()
  expect_pieces_as_add(int16_device(scale, 0), r, 8192, false);
}

// Chunks with a piece or two of values each (a KV cache's heads, its unwritten slots zero): the
// pieces wait for the next chunks' to fill eight chains, and are added in piece order, before any
// pair added after them, as add() piece by piece would.
TEST(IdealNoise, PiecesHeldAcrossChunksAreTheSameBitsAsOneByOne) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.1f, 1.5f);
  constexpr uint64_t kPiece = 8192, kChunk = 8 * kPiece;
  std::vector<float> r(11 * kChunk, 0.0f);
  for (uint64_t chunk = 0; chunk < 11; ++chunk) {
    const uint64_t values = kPiece + 1000 * chunk + 3;  // the second piece partly written
    for (uint64_t i = 0; i < values; ++i) r[chunk * kChunk + i] = normal(rng);
  }
  r[3 * kChunk + 17] = std::numeric_limits<float>::quiet_NaN();
  const double scale = 8.0 / 32767;
  for (const int64_t offset : {int64_t{0}, int64_t{40000}}) {  // zero on the grid, and off it
    const TensorRecord device = int16_device(scale, offset);
    IdealNoise by_piece(device, {}), held(device, {}), after(device, {});
    for (uint64_t at = 0; at < r.size(); at += kPiece) {
      by_piece.add(r.data() + at, r.data() + at, kPiece, at);
    }
    for (uint64_t at = 0; at < r.size(); at += kChunk) {
      EXPECT_TRUE(held.add_pieces(r.data() + at, kChunk, at, kPiece) ||
                  !kernels::supported(kernels::Isa::kAvx2));
    }
    ASSERT_TRUE(by_piece.sqnr_db());
    EXPECT_EQ(*held.sqnr_db(), *by_piece.sqnr_db());
    // A pair added after the held pieces comes after them.
    const float late[8] = {3.25f, -1.5f, 0.125f, 2, 1, -4, 0.5f, 7};
    by_piece.add(late, late, 8, r.size());
    held.add(late, late, 8, r.size());
    EXPECT_EQ(*held.sqnr_db(), *by_piece.sqnr_db());
    after.merge(held);
    EXPECT_EQ(*after.sqnr_db(), *by_piece.sqnr_db());
  }
}

TEST(IdealNoise, InactiveWithoutAnEncoding) {
  TensorRecord t = uint8_device(0.1, 0);
  t.quant = {};
  EXPECT_FALSE(IdealNoise(t, {}).active());
  EXPECT_FALSE(IdealNoise(t, {}).sqnr_db());
}

}  // namespace
}  // namespace qd::compare
