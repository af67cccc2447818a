#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/compare/worst.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

// Private to qd_compare: the test hook that picks the kernels' instruction set.
#include "kernel_dispatch.h"

namespace qd::compare {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();

// An independent recomputation of every figure, straight from docs/metrics.md, in long double.
struct Exact {
  uint64_t elements = 0, n = 0, ref_nan = 0, ref_inf = 0, dev_nan = 0, dev_inf = 0;
  long double r2 = 0, d2 = 0, e2 = 0, abs_e = 0, rd = 0;
  uint64_t close = 0;
  double max_abs = 0;
  std::vector<uint64_t> exponent_counts = std::vector<uint64_t>(256, 0);

  Exact(const std::vector<double>& r, const std::vector<double>& d, MetricOptions options = {}) {
    elements = r.size();
    for (size_t i = 0; i < r.size(); ++i) {
      ref_nan += std::isnan(r[i]);
      ref_inf += std::isinf(r[i]);
      dev_nan += std::isnan(d[i]);
      dev_inf += std::isinf(d[i]);
      if (!std::isfinite(r[i]) || !std::isfinite(d[i])) continue;
      const double a = r[i], b = d[i], e = b - a;
      ++n;
      r2 += static_cast<long double>(a) * a;
      d2 += static_cast<long double>(b) * b;
      e2 += static_cast<long double>(e) * e;
      abs_e += std::fabs(e);
      rd += static_cast<long double>(a) * b;
      close += std::fabs(e) <= options.atol + options.rtol * std::fabs(a);
      max_abs = std::max(max_abs, std::fabs(e));
      ++exponent_counts[std::bit_cast<uint32_t>(static_cast<float>(std::fabs(e))) >> 23];
    }
  }
  double sqnr_db() const {
    return e2 == 0 ? kInf : r2 == 0 ? -kInf : static_cast<double>(10 * std::log10(r2 / e2));
  }
  double mse() const { return n ? static_cast<double>(e2 / n) : 0; }
  double mae() const { return n ? static_cast<double>(abs_e / n) : 0; }
  double cosine() const {
    if (r2 == 0 || d2 == 0) return r2 == d2 ? 1 : 0;
    return static_cast<double>(rd / std::sqrt(r2 * d2));
  }
  double rel_l2() const {
    return e2 == 0 ? 0 : r2 == 0 ? kInf : static_cast<double>(std::sqrt(e2 / r2));
  }
  double allclose_frac() const { return n ? static_cast<double>(close) / n : 1; }
};

void expect_rel(double actual, double expected, double tolerance, const char* what) {
  if (std::isinf(expected) || expected == 0) {
    EXPECT_EQ(actual, expected) << what;
    return;
  }
  EXPECT_LE(std::fabs(actual - expected), tolerance * std::fabs(expected))
      << what << ": " << actual << " vs exact " << expected;
}

// Every figure against the exact recomputation to `tolerance` relative.
void expect_matches_exact(const Metrics& m, const Exact& x, const std::vector<double>& r,
                          const std::vector<double>& d, double tolerance = 1e-6) {
  EXPECT_EQ(m.elements, x.elements);
  EXPECT_EQ(m.n, x.n);
  EXPECT_EQ(m.ref_nan, x.ref_nan);
  EXPECT_EQ(m.ref_inf, x.ref_inf);
  EXPECT_EQ(m.dev_nan, x.dev_nan);
  EXPECT_EQ(m.dev_inf, x.dev_inf);
  expect_rel(m.sqnr_db, x.sqnr_db(), tolerance, "sqnr_db");
  expect_rel(m.mse, x.mse(), tolerance, "mse");
  expect_rel(m.rmse, std::sqrt(x.mse()), tolerance, "rmse");
  expect_rel(m.mae, x.mae(), tolerance, "mae");
  expect_rel(m.l1_sum, static_cast<double>(x.abs_e), tolerance, "l1_sum");
  expect_rel(m.rel_l2, x.rel_l2(), tolerance, "rel_l2");
  expect_rel(m.cosine, x.cosine(), tolerance, "cosine");
  EXPECT_EQ(m.allclose_frac, x.allclose_frac()) << "allclose is an exact count";
  // The largest error: within float rounding of the true maximum, and exactly |e| of the element
  // it names.
  expect_rel(m.max_abs, x.max_abs, 0x1p-23, "max_abs");
  if (x.n > 0) {
    ASSERT_LT(m.max_abs_index, r.size());
    EXPECT_EQ(m.max_abs, std::fabs(static_cast<double>(d[m.max_abs_index]) - r[m.max_abs_index]));
  }
  // The histogram: every finite pair counted once, in the documented bins.
  ASSERT_EQ(m.error_histogram.size(), kHistogramBins);
  ASSERT_EQ(m.histogram_edges.size(), kHistogramBins + 1);
  EXPECT_EQ(std::accumulate(m.error_histogram.begin(), m.error_histogram.end(), uint64_t{0}), x.n);
  int top = 127;
  for (int e = 255; e >= 1; --e) {
    if (x.exponent_counts[static_cast<size_t>(e)]) {
      top = e;
      break;
    }
  }
  top = std::max(top, 31);
  std::vector<uint64_t> bins(kHistogramBins, 0);
  for (int e = 0; e <= top; ++e) {
    bins[static_cast<size_t>(std::max(0, e - (top - 31)))] +=
        x.exponent_counts[static_cast<size_t>(e)];
  }
  EXPECT_EQ(m.error_histogram, bins);
}

Metrics one_pass(const std::vector<double>& r, const std::vector<double>& d,
                 MetricOptions options = {}, const Quantization* quant = nullptr) {
  MetricAccumulator acc(options);
  acc.add(r.data(), d.data(), r.size(), 0);
  return acc.finish(quant);
}

// Mixed magnitudes (about 1e-4 .. 1e4), noise of a few percent plus an absolute floor.
void random_pair(size_t n, uint64_t seed, std::vector<double>& r, std::vector<double>& d,
                 bool sprinkle_non_finite) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  r.resize(n);
  d.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r[i] = normal(rng) * std::exp(2.0f * normal(rng));
    d[i] = r[i] * (1 + 0.03f * normal(rng)) + 1e-3f * normal(rng);
  }
  if (sprinkle_non_finite && n > 0) {
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    const size_t count = std::max<size_t>(1, n / 5000);
    for (size_t k = 0; k < count; ++k) {
      r[pick(rng)] = kNanF;
      d[pick(rng)] = kNanF;
      r[pick(rng)] = -kInfF;
      d[pick(rng)] = kInfF;
    }
  }
}

TEST(Metrics, HandComputedSmallTensor) {
  // e = {0.5, 0, -1, 0}; sum r^2 = 30, sum d^2 = 26.25, sum e^2 = 1.25, sum r d = 27.5.
  const std::vector<double> r = {1, 2, 3, 4};
  const std::vector<double> d = {1.5f, 2, 2, 4};
  MetricAccumulator acc;
  acc.add(r.data(), d.data(), 4, 10);  // elements 10..13
  const Metrics m = acc.finish(nullptr);
  EXPECT_EQ(m.elements, 4u);
  EXPECT_EQ(m.n, 4u);
  EXPECT_DOUBLE_EQ(m.sqnr_db, 10 * std::log10(30 / 1.25));  // 13.8021 dB
  EXPECT_DOUBLE_EQ(m.mse, 1.25 / 4);
  EXPECT_DOUBLE_EQ(m.rmse, std::sqrt(1.25 / 4));
  EXPECT_DOUBLE_EQ(m.mae, 1.5 / 4);
  EXPECT_DOUBLE_EQ(m.l1_sum, 1.5);
  EXPECT_DOUBLE_EQ(m.max_abs, 1.0);
  EXPECT_EQ(m.max_abs_index, 12u);
  EXPECT_DOUBLE_EQ(m.rel_l2, std::sqrt(1.25 / 30));
  EXPECT_DOUBLE_EQ(m.cosine, 27.5 / std::sqrt(30 * 26.25));  // 0.97996
  EXPECT_DOUBLE_EQ(m.allclose_frac, 0.5);                    // the two exact pairs
  EXPECT_FALSE(m.lsb_mae);
  EXPECT_FALSE(m.saturation);
  EXPECT_TRUE(m.channels.empty());
  EXPECT_FALSE(m.worst_channel);
  // Histogram: 0.5 in [2^-1, 2^0), 1 in [2^0, 2^1) = the top bin; zeros in bin 0.
  EXPECT_EQ(m.error_histogram[31], 1u);
  EXPECT_EQ(m.error_histogram[30], 1u);
  EXPECT_EQ(m.error_histogram[0], 2u);
  EXPECT_EQ(m.histogram_edges[0], 0.0);
  EXPECT_EQ(m.histogram_edges[31], 1.0);
  EXPECT_EQ(m.histogram_edges[32], 2.0);
  EXPECT_EQ(m.histogram_edges[1], std::ldexp(1.0, -30));
}

TEST(Metrics, HandComputedOnTheVectorPath) {
  // The same four pairs repeated 64 times (256 pairs: the float path): sums scale by 64.
  std::vector<double> r, d;
  for (int k = 0; k < 64; ++k) {
    r.insert(r.end(), {1, 2, 3, 4});
    d.insert(d.end(), {1.5f, 2, 2, 4});
  }
  const Metrics m = one_pass(r, d);
  EXPECT_EQ(m.n, 256u);
  EXPECT_DOUBLE_EQ(m.sqnr_db, 10 * std::log10(30 / 1.25));
  EXPECT_DOUBLE_EQ(m.mse, 1.25 / 4);
  EXPECT_DOUBLE_EQ(m.mae, 1.5 / 4);
  EXPECT_DOUBLE_EQ(m.l1_sum, 1.5 * 64);
  EXPECT_DOUBLE_EQ(m.max_abs, 1.0);
  EXPECT_EQ(m.max_abs_index, 2u);  // the first of the 64 equal maxima
  EXPECT_DOUBLE_EQ(m.cosine, 27.5 / std::sqrt(30 * 26.25));
  EXPECT_DOUBLE_EQ(m.allclose_frac, 0.5);
  EXPECT_EQ(m.error_histogram[31], 64u);
  EXPECT_EQ(m.error_histogram[30], 64u);
  EXPECT_EQ(m.error_histogram[0], 128u);
}

TEST(Metrics, MatchesExactRecomputationOnRandomTensors) {
  const size_t sizes[] = {1, 3, 15, 16, 17, 255, 256, 257, 1000, 4099, 100003};
  for (size_t size : sizes) {
    for (bool non_finite : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "size " << size << " non-finite " << non_finite);
      std::vector<double> r, d;
      random_pair(size, size * 2 + non_finite, r, d, non_finite);
      expect_matches_exact(one_pass(r, d), Exact(r, d), r, d);
    }
  }
}

TEST(Metrics, MatchesExactRecomputationOnTenMillionElementsInChunks) {
  const size_t n = 10'000'000;
  std::vector<double> r, d;
  random_pair(n, 42, r, d, true);
  MetricAccumulator acc;
  std::mt19937 rng(3);
  for (size_t first = 0; first < n;) {  // chunks of random length, odd offsets included
    const size_t count = std::min<size_t>(n - first, 1 + rng() % 300000);
    acc.add(r.data() + first, d.data() + first, count, first);
    first += count;
  }
  const Metrics m = acc.finish(nullptr);
  const Exact x(r, d);
  expect_matches_exact(m, x, r, d);
  std::printf(
      "[ info     ] 10M: sqnr %.9f dB (exact %.9f), mse rel err %.1e, cosine rel err %.1e\n",
      m.sqnr_db, x.sqnr_db(), std::fabs(m.mse / x.mse() - 1), std::fabs(m.cosine / x.cosine() - 1));
}

TEST(Metrics, ConstantTensorsDoNotAccumulateRoundingBias) {
  // Summing one value over and over rounds the same way every time: the worst case for float
  // partial sums. Chains of at most 16 additions keep it within the contract.
  for (float value : {0.1f, 0.3f, 1.7f, 1234.567f}) {
    for (float error : {1e-3f, 0.0123f, 3.3f}) {
      std::vector<double> r(1 << 20, value), d(1 << 20, value + error);
      expect_matches_exact(one_pass(r, d), Exact(r, d), r, d);
    }
  }
}

TEST(Metrics, HugeAndTinyValuesFallBackToDouble) {
  std::vector<double> r, d;
  random_pair(5000, 9, r, d, false);
  std::vector<double> huge_r(r), huge_d(d), tiny_r(r), tiny_d(d), mixed_r(r), mixed_d(d);
  for (size_t i = 0; i < r.size(); ++i) {
    huge_r[i] = r[i] * 1e30f;  // squares overflow float
    huge_d[i] = d[i] * 1e30f;
    tiny_r[i] = r[i] * 1e-30f;  // squares underflow float
    tiny_d[i] = d[i] * 1e-30f;
  }
  for (size_t i = 0; i < r.size(); i += 2) {
    mixed_d[i] = r[i] + 1e-25f * (d[i] - r[i]);  // errors whose squares underflow
  }
  expect_matches_exact(one_pass(huge_r, huge_d), Exact(huge_r, huge_d), huge_r, huge_d);
  expect_matches_exact(one_pass(tiny_r, tiny_d), Exact(tiny_r, tiny_d), tiny_r, tiny_d);
  expect_matches_exact(one_pass(mixed_r, mixed_d), Exact(mixed_r, mixed_d), mixed_r, mixed_d);
  // |d - r| beyond the float range, for finite values: still finite in double.
  std::vector<double> big_r(64, 3e38f), big_d(64, -3e38f);
  const Metrics m = one_pass(big_r, big_d);
  EXPECT_EQ(m.n, 64u);
  EXPECT_EQ(m.max_abs, 2.0 * static_cast<double>(3e38f));
  EXPECT_DOUBLE_EQ(m.sqnr_db, 10 * std::log10(1.0 / 4));
  EXPECT_EQ(m.error_histogram[31], 64u);  // |e| beyond float range: the top bin
  EXPECT_EQ(m.histogram_edges[32], std::ldexp(1.0, 129));
}

TEST(Metrics, IdenticalTensors) {
  std::vector<double> r, d;
  random_pair(1000, 1, r, d, false);
  const Metrics m = one_pass(r, r);
  EXPECT_EQ(m.sqnr_db, kInf);
  EXPECT_EQ(m.mse, 0);
  EXPECT_EQ(m.rmse, 0);
  EXPECT_EQ(m.mae, 0);
  EXPECT_EQ(m.l1_sum, 0);
  EXPECT_EQ(m.max_abs, 0);
  EXPECT_EQ(m.max_abs_index, 0u);  // every pair ties: the lowest index
  EXPECT_EQ(m.rel_l2, 0);
  EXPECT_EQ(m.cosine, 1);
  EXPECT_EQ(m.allclose_frac, 1);
  EXPECT_EQ(m.error_histogram[0], 1000u);
  EXPECT_EQ(m.histogram_edges[32], 2.0);  // no nonzero error: the top bin is [1, 2)
  // Exact equality also passes atol = rtol = 0.
  EXPECT_EQ(one_pass(r, r, {0, 0}).allclose_frac, 1);
}

TEST(Metrics, AllZeroReference) {
  std::vector<double> r(300, 0.0f), d(300, 0.0f);
  d[7] = 0.5f;
  d[200] = -0.25f;
  const Metrics m = one_pass(r, d);
  EXPECT_EQ(m.sqnr_db, -kInf);
  EXPECT_EQ(m.rel_l2, kInf);
  EXPECT_EQ(m.cosine, 0);
  EXPECT_DOUBLE_EQ(m.mse, (0.25 + 0.0625) / 300);
  EXPECT_EQ(m.max_abs, 0.5);
  EXPECT_EQ(m.max_abs_index, 7u);
  EXPECT_DOUBLE_EQ(m.allclose_frac, 298.0 / 300);
  // And the other way round: all-zero device output, nonzero reference.
  const Metrics dead = one_pass(d, r);
  EXPECT_EQ(dead.sqnr_db, 0.0);  // sum e^2 = sum r^2
  EXPECT_EQ(dead.cosine, 0);
  EXPECT_EQ(dead.rel_l2, 1.0);
}

TEST(Metrics, AllZeroBoth) {
  for (size_t n : {5u, 300u}) {
    std::vector<double> zeros(n, 0.0f), negative_zeros(n, -0.0f);
    const Metrics m = one_pass(zeros, negative_zeros);
    EXPECT_EQ(m.n, n);
    EXPECT_EQ(m.sqnr_db, kInf);
    EXPECT_EQ(m.rel_l2, 0);
    EXPECT_EQ(m.cosine, 1);
    EXPECT_EQ(m.mse, 0);
    EXPECT_EQ(m.allclose_frac, 1);
  }
}

void expect_empty_figures(const Metrics& m) {
  EXPECT_EQ(m.n, 0u);
  EXPECT_EQ(m.sqnr_db, kInf);
  EXPECT_EQ(m.mse, 0);
  EXPECT_EQ(m.rmse, 0);
  EXPECT_EQ(m.mae, 0);
  EXPECT_EQ(m.l1_sum, 0);
  EXPECT_EQ(m.max_abs, 0);
  EXPECT_EQ(m.max_abs_index, 0u);
  EXPECT_EQ(m.rel_l2, 0);
  EXPECT_EQ(m.cosine, 1);
  EXPECT_EQ(m.allclose_frac, 1);
  EXPECT_EQ(m.error_histogram, std::vector<uint64_t>(kHistogramBins, 0));
  EXPECT_EQ(m.histogram_edges.size(), kHistogramBins + 1);
  EXPECT_EQ(m.histogram_edges[32], 2.0);
}

TEST(Metrics, EmptyTensor) {
  MetricAccumulator acc;
  acc.add<double, double>(nullptr, nullptr, 0, 0);
  Quantization quant;
  quant.scales = {0.1};
  quant.offsets = {0};
  const Metrics m = acc.finish(&quant);
  EXPECT_EQ(m.elements, 0u);
  expect_empty_figures(m);
  EXPECT_EQ(m.lsb_mae, 0.0);
  EXPECT_EQ(m.lsb_max, 0.0);
  EXPECT_EQ(m.noise_ratio, 0.0);
  EXPECT_EQ(m.saturation, 0.0);
}

TEST(Metrics, NanAndInfAreCountedPerSideAndExcluded) {
  for (size_t n : {8u, 512u}) {
    std::vector<double> r(n, 1.0f), d(n, 1.0f);
    r[1] = kNanF;
    r[2] = kInfF;
    r[3] = -kInfF;
    d[3] = kNanF;  // both sides of one pair
    d[4] = kNanF;
    d[5] = -kInfF;
    d[6] = 3.0f;  // the only finite error
    const Metrics m = one_pass(r, d);
    EXPECT_EQ(m.elements, n);
    EXPECT_EQ(m.n, n - 5);
    EXPECT_EQ(m.ref_nan, 1u);
    EXPECT_EQ(m.ref_inf, 2u);
    EXPECT_EQ(m.dev_nan, 2u);
    EXPECT_EQ(m.dev_inf, 1u);
    EXPECT_EQ(m.max_abs, 2.0);
    EXPECT_EQ(m.max_abs_index, 6u);
    EXPECT_DOUBLE_EQ(m.mse, 4.0 / static_cast<double>(n - 5));
    EXPECT_DOUBLE_EQ(m.sqnr_db, 10 * std::log10(static_cast<double>(n - 5) / 4));
    EXPECT_FALSE(std::isnan(m.cosine));
  }
  // Nothing finite at all: the empty conventions, with the counts.
  std::vector<double> r(100, 1.0f), d(100, kNanF);
  const Metrics m = one_pass(r, d);
  EXPECT_EQ(m.dev_nan, 100u);
  EXPECT_EQ(m.elements, 100u);
  expect_empty_figures(m);
}

TEST(Metrics, MergeOfChunksEqualsOnePass) {
  std::vector<double> r, d;
  random_pair(200000, 11, r, d, true);
  const Metrics whole = one_pass(r, d);
  for (bool aligned : {true, false}) {
    std::mt19937 rng(aligned ? 1 : 2);
    std::vector<size_t> cuts = {0, r.size()};
    for (int k = 0; k < 9; ++k) {
      size_t cut = rng() % r.size();
      if (aligned) cut -= cut % 256;
      cuts.push_back(cut);
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<MetricAccumulator> parts;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      parts.emplace_back();
      parts.back().add(r.data() + cuts[k], d.data() + cuts[k], cuts[k + 1] - cuts[k], cuts[k]);
    }
    MetricAccumulator merged;
    for (size_t k = parts.size(); k-- > 0;) merged.merge(parts[k]);  // any order
    const Metrics m = merged.finish(nullptr);
    const double tolerance = aligned ? 1e-12 : 1e-7;  // same blocks vs re-cut blocks
    EXPECT_EQ(m.elements, whole.elements);
    EXPECT_EQ(m.n, whole.n);
    EXPECT_EQ(m.ref_nan, whole.ref_nan);
    EXPECT_EQ(m.dev_inf, whole.dev_inf);
    EXPECT_EQ(m.max_abs, whole.max_abs);
    EXPECT_EQ(m.max_abs_index, whole.max_abs_index);
    EXPECT_EQ(m.allclose_frac, whole.allclose_frac);
    EXPECT_EQ(m.error_histogram, whole.error_histogram);
    EXPECT_EQ(m.histogram_edges, whole.histogram_edges);
    expect_rel(m.sqnr_db, whole.sqnr_db, tolerance, "sqnr_db");
    expect_rel(m.mse, whole.mse, tolerance, "mse");
    expect_rel(m.mae, whole.mae, tolerance, "mae");
    expect_rel(m.cosine, whole.cosine, tolerance, "cosine");
  }
}

TEST(Metrics, LargestErrorTiesGoToTheLowestIndex) {
  std::vector<double> r(600, 0.0f), d(600, 0.0f);
  d[450] = 2.0f;
  d[90] = -2.0f;
  d[300] = 2.0f;
  // In order, out of order, and through merge.
  EXPECT_EQ(one_pass(r, d).max_abs_index, 90u);
  MetricAccumulator backwards;
  backwards.add(r.data() + 300, d.data() + 300, 300, 300);
  backwards.add(r.data(), d.data(), 300, 0);
  EXPECT_EQ(backwards.finish(nullptr).max_abs_index, 90u);
  MetricAccumulator low, high;
  low.add(r.data(), d.data(), 300, 0);
  high.add(r.data() + 300, d.data() + 300, 300, 300);
  high.merge(low);
  EXPECT_EQ(high.finish(nullptr).max_abs_index, 90u);
  // Scalar path (short runs) too.
  MetricAccumulator scalar;
  for (uint64_t i = 600; i-- > 0;) scalar.add(&r[i], &d[i], 1, i);
  EXPECT_EQ(scalar.finish(nullptr).max_abs_index, 90u);
}

TEST(Metrics, AllcloseBoundaryIsDecidedInDouble) {
  // |e| exactly equal to atol + rtol |r| passes; one float step beyond fails. Many pairs sit on
  // the boundary, so the float test must defer to double.
  const MetricOptions options{0.0, 0x1p-10};
  std::vector<double> r(256), d(256);
  size_t expected = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = static_cast<float>(1 + i % 7);
    const float on_boundary = r[i] + r[i] * 0x1p-10f;
    d[i] = i % 2 ? on_boundary : std::nextafter(on_boundary, 1e9f);
    const double e = std::fabs(static_cast<double>(d[i]) - r[i]);
    expected += e <= options.atol + options.rtol * std::fabs(static_cast<double>(r[i]));
  }
  EXPECT_EQ(expected, 128u);
  EXPECT_DOUBLE_EQ(one_pass(r, d, options).allclose_frac, 0.5);
  // Default tolerances on random data agree with the exact count (checked in Exact) too.
  std::vector<double> rr, dd;
  random_pair(10000, 17, rr, dd, false);
  for (size_t i = 0; i < rr.size(); ++i) dd[i] = rr[i] + (dd[i] - rr[i]) * 0.05f;
  const MetricOptions loose{1e-4, 1e-2};
  EXPECT_EQ(one_pass(rr, dd, loose).allclose_frac, Exact(rr, dd, loose).allclose_frac());
  // Odd tolerances (negative, NaN) take the double test everywhere.
  const MetricOptions odd{-1.0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(one_pass(rr, dd, odd).allclose_frac, 0.0);
}

TEST(Metrics, QuantizedPerTensor) {
  std::vector<double> r(1000), d(1000);
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = static_cast<float>(i) * 0.01f;
    d[i] = r[i] + (i % 4 == 0 ? 0.05f : -0.025f);
  }
  Quantization quant;
  quant.scales = {0.1};
  quant.offsets = {0};
  MetricAccumulator acc;
  acc.add(r.data(), d.data(), r.size(), 0);
  acc.add_saturation(30);
  const Metrics m = acc.finish(&quant);
  ASSERT_TRUE(m.lsb_mae && m.lsb_max && m.noise_ratio && m.saturation);
  EXPECT_DOUBLE_EQ(*m.lsb_mae, m.mae / 0.1);
  EXPECT_DOUBLE_EQ(*m.lsb_max, m.max_abs / 0.1);
  EXPECT_DOUBLE_EQ(*m.noise_ratio, m.rmse / (0.1 / std::sqrt(12.0)));
  EXPECT_DOUBLE_EQ(*m.saturation, 0.03);
  EXPECT_NEAR(*m.lsb_max, 0.5, 1e-4);
  EXPECT_TRUE(m.channels.empty());
  // Unquantized device: no quantized figures even with saturation counted.
  EXPECT_FALSE(acc.finish(nullptr).saturation);
  Quantization none;
  EXPECT_FALSE(acc.finish(&none).lsb_mae);
}

TEST(Metrics, PerAxisChannelsAndWorstChannel) {
  // Channel c of 3 (channel axis last: channels cycle every element); channel 2 is the noisiest,
  // then channel 1.
  const size_t n = 3000;
  std::vector<double> r(n), d(n);
  std::vector<uint32_t> ids(n);
  const double scales[] = {0.01, 0.02, 0.05};
  const float noise[] = {0.001f, 0.004f, 0.02f};
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0, 1);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<uint32_t>(i % 3);
    r[i] = normal(rng);
    d[i] = r[i] + noise[ids[i]] * normal(rng);
  }
  Quantization quant;
  quant.scales.assign(std::begin(scales), std::end(scales));
  quant.offsets = {0, 0, 0};
  quant.axis = 1;
  MetricAccumulator acc({}, {3, 1});
  for (size_t first = 0; first < n; first += 1001) {  // pieces that start mid-row
    acc.add(r.data() + first, d.data() + first, std::min<size_t>(1001, n - first), first);
  }
  const Metrics m = acc.finish(&quant);
  ASSERT_EQ(m.channels.size(), 3u);
  ASSERT_TRUE(m.worst_channel);
  EXPECT_EQ(*m.worst_channel, 2u);
  EXPECT_EQ(m.worst_channels, (std::vector<uint64_t>{2, 1, 0}));

  double abs_over_scale = 0, scale_power = 0, e2 = 0, max_lsb = 0;
  for (uint32_t c = 0; c < 3; ++c) {
    double cr2 = 0, ce2 = 0, cabs = 0, cmax = 0;
    uint64_t cn = 0;
    for (size_t i = c; i < n; i += 3) {
      const double e = static_cast<double>(d[i]) - r[i];
      cr2 += static_cast<double>(r[i]) * r[i];
      ce2 += e * e;
      cabs += std::fabs(e);
      cmax = std::max(cmax, std::fabs(e));
      ++cn;
    }
    const ChannelMetrics& ch = m.channels[c];
    EXPECT_EQ(ch.n, cn);
    expect_rel(ch.sqnr_db, 10 * std::log10(cr2 / ce2), 1e-9, "channel sqnr");
    expect_rel(ch.mae, cabs / static_cast<double>(cn), 1e-9, "channel mae");
    EXPECT_EQ(ch.max_abs, cmax);
    ASSERT_TRUE(ch.lsb_mae && ch.lsb_max);
    expect_rel(*ch.lsb_mae, cabs / static_cast<double>(cn) / scales[c], 1e-9, "channel lsb_mae");
    expect_rel(*ch.lsb_max, cmax / scales[c], 1e-12, "channel lsb_max");
    abs_over_scale += cabs / scales[c];
    scale_power += static_cast<double>(cn) * scales[c] * scales[c];
    e2 += ce2;
    max_lsb = std::max(max_lsb, cmax / scales[c]);
  }
  expect_rel(*m.lsb_mae, abs_over_scale / static_cast<double>(n), 1e-9, "lsb_mae");
  expect_rel(*m.lsb_max, max_lsb, 1e-12, "lsb_max");
  // rmse over (RMS scale / sqrt 12), the RMS weighted by each channel's pairs.
  const double rms_scale = std::sqrt(scale_power / static_cast<double>(n));
  expect_rel(*m.noise_ratio, std::sqrt(e2 / static_cast<double>(n)) / (rms_scale / std::sqrt(12.0)),
             1e-9, "noise_ratio");
  // Same figures when every channel arrives as one long run (channel axis first).
  // Same figures when every channel arrives as one long run (channel axis first), and in runs of
  // two (channel axis before a last axis of 2: the element-wise row path).
  std::vector<double> rs, ds, r2s(n), d2s(n);
  for (uint32_t c = 0; c < 3; ++c) {
    for (size_t i = c; i < n; i += 3) {
      rs.push_back(r[i]);
      ds.push_back(d[i]);
      const size_t row = i / 3, pairs_at = (row / 2) * 6 + c * 2 + row % 2;
      r2s[pairs_at] = r[i];
      d2s[pairs_at] = d[i];
    }
  }
  MetricAccumulator runs({}, {3, n / 3});
  runs.add(rs.data(), ds.data(), n, 0);
  MetricAccumulator twos({}, {3, 2});
  twos.add(r2s.data(), d2s.data(), 7, 0);
  twos.add(r2s.data() + 7, d2s.data() + 7, n - 7, 7);
  for (const Metrics& other : {runs.finish(&quant), twos.finish(&quant)}) {
    for (uint32_t c = 0; c < 3; ++c) {
      expect_rel(other.channels[c].sqnr_db, m.channels[c].sqnr_db, 1e-6, "run channel sqnr");
      expect_rel(other.channels[c].max_abs, m.channels[c].max_abs, 0x1p-23, "run channel max");
      EXPECT_EQ(other.channels[c].n, m.channels[c].n);
    }
    expect_rel(other.sqnr_db, m.sqnr_db, 1e-6, "run sqnr");
    EXPECT_EQ(other.worst_channels, m.worst_channels);
  }
  // A per-axis encoding whose scale count does not match the channels: no LSB figures.
  MetricAccumulator single;
  single.add(r.data(), d.data(), n, 0);
  const Metrics ms = single.finish(&quant);
  EXPECT_FALSE(ms.lsb_mae);
  EXPECT_FALSE(ms.noise_ratio);
  EXPECT_TRUE(ms.saturation);
}

TEST(Metrics, ChannelWithoutFinitePairs) {
  std::vector<double> r = {1, 2, kNanF, kNanF}, d = {1, 2.5f, 1, 1};
  MetricAccumulator acc({}, {2, 2});  // channels 0, 0, 1, 1
  acc.add(r.data(), d.data(), 4, 0);
  const Metrics m = acc.finish(nullptr);
  ASSERT_EQ(m.channels.size(), 2u);
  EXPECT_EQ(m.channels[1].n, 0u);
  EXPECT_EQ(m.channels[1].sqnr_db, kInf);
  EXPECT_EQ(*m.worst_channel, 0u);
  EXPECT_FALSE(m.channels[0].lsb_mae);
}

// Bit patterns, so that "identical" also tells -0 from 0 and compares NaNs.
uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }
std::optional<uint64_t> bits(const std::optional<double>& x) {
  return x ? std::optional<uint64_t>(bits(*x)) : std::nullopt;
}

void expect_identical(const Metrics& a, const Metrics& b) {
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.ref_nan, b.ref_nan);
  EXPECT_EQ(a.ref_inf, b.ref_inf);
  EXPECT_EQ(a.dev_nan, b.dev_nan);
  EXPECT_EQ(a.dev_inf, b.dev_inf);
  EXPECT_EQ(bits(a.sqnr_db), bits(b.sqnr_db)) << a.sqnr_db << " vs " << b.sqnr_db;
  EXPECT_EQ(bits(a.mse), bits(b.mse)) << a.mse << " vs " << b.mse;
  EXPECT_EQ(bits(a.rmse), bits(b.rmse));
  EXPECT_EQ(bits(a.mae), bits(b.mae)) << a.mae << " vs " << b.mae;
  EXPECT_EQ(bits(a.l1_sum), bits(b.l1_sum));
  EXPECT_EQ(bits(a.max_abs), bits(b.max_abs));
  EXPECT_EQ(a.max_abs_index, b.max_abs_index);
  EXPECT_EQ(bits(a.rel_l2), bits(b.rel_l2));
  EXPECT_EQ(bits(a.cosine), bits(b.cosine)) << a.cosine << " vs " << b.cosine;
  EXPECT_EQ(bits(a.allclose_frac), bits(b.allclose_frac));
  EXPECT_EQ(bits(a.lsb_mae), bits(b.lsb_mae));
  EXPECT_EQ(bits(a.lsb_max), bits(b.lsb_max));
  EXPECT_EQ(bits(a.noise_ratio), bits(b.noise_ratio));
  EXPECT_EQ(bits(a.saturation), bits(b.saturation));
  ASSERT_EQ(a.channels.size(), b.channels.size());
  for (size_t c = 0; c < a.channels.size(); ++c) {
    EXPECT_EQ(bits(a.channels[c].sqnr_db), bits(b.channels[c].sqnr_db)) << "channel " << c;
    EXPECT_EQ(bits(a.channels[c].mae), bits(b.channels[c].mae)) << "channel " << c;
    EXPECT_EQ(bits(a.channels[c].max_abs), bits(b.channels[c].max_abs)) << "channel " << c;
    EXPECT_EQ(a.channels[c].n, b.channels[c].n) << "channel " << c;
    EXPECT_EQ(bits(a.channels[c].lsb_mae), bits(b.channels[c].lsb_mae)) << "channel " << c;
    EXPECT_EQ(bits(a.channels[c].lsb_max), bits(b.channels[c].lsb_max)) << "channel " << c;
  }
  EXPECT_EQ(a.worst_channel, b.worst_channel);
  EXPECT_EQ(a.error_histogram, b.error_histogram);
  ASSERT_EQ(a.histogram_edges.size(), b.histogram_edges.size());
  for (size_t i = 0; i < a.histogram_edges.size(); ++i) {
    EXPECT_EQ(bits(a.histogram_edges[i]), bits(b.histogram_edges[i])) << "edge " << i;
  }
}

// Random pairs in blocks of 256 (the float pass's unit) of different kinds: ordinary, huge
// (squares overflow float), tiny (squares underflow), mixed (errors underflow), constant,
// identical, very wide ranges, and some with NaN / Inf. More than 2^17 pairs, so both histogram
// paths run.
void mixed_blocks(size_t blocks, uint64_t seed, std::vector<double>& r, std::vector<double>& d) {
  random_pair(blocks * 256, seed, r, d, true);
  std::mt19937_64 rng(seed + 1);
  for (size_t b = 0; b < blocks; ++b) {
    double* rb = r.data() + b * 256;
    double* db = d.data() + b * 256;
    const auto kind = rng() % 8;  // 0, 7: left as they are
    for (size_t i = 0; i < 256; ++i) {
      switch (kind) {
        case 1:
          rb[i] *= 1e30f;
          db[i] *= 1e30f;
          break;
        case 2:
          rb[i] *= 1e-30f;
          db[i] *= 1e-30f;
          break;
        case 3:
          db[i] = rb[i] + 1e-25f * (db[i] - rb[i]);
          break;
        case 4:
          rb[i] = 1.7f;
          db[i] = 1.7f + 0.0123f;
          break;
        case 5:
          db[i] = rb[i];
          break;
        case 6:  // magnitudes 2^-20 .. 2^20: double sums of the float partials round
          rb[i] = std::ldexp(rb[i], static_cast<int>(rng() % 41) - 20);
          db[i] = rb[i] * (1 + 0x1p-10f * static_cast<float>(rng() % 64));
          break;
      }
    }
  }
}

// The metrics of r, d with the kernels of `isa`: chunks of random length (so runs and blocks end
// anywhere), and per-axis channels when `channels` > 1 (runs of 37, not a multiple of 8).
Metrics metrics_on(kernels::Isa isa, const std::vector<double>& r, const std::vector<double>& d,
                   MetricOptions options, uint32_t channels) {
  const kernels::ScopedIsaForTesting scope(isa);
  MetricAccumulator acc(options, {channels, 37});
  std::mt19937 rng(5);
  for (size_t first = 0; first < r.size();) {
    const size_t count = std::min<size_t>(r.size() - first, 1 + rng() % 20000);
    acc.add(r.data() + first, d.data() + first, count, first);
    first += count;
  }
  Quantization quant;
  quant.scales.assign(channels, 0.01);
  quant.offsets.assign(channels, 0);
  if (channels > 1) quant.axis = 0;
  acc.add_saturation(17);
  return acc.finish(&quant);
}

TEST(Metrics, DefaultKernelsAreTheBestTheCpuSupports) {
  const bool avx2 = kernels::supported(kernels::Isa::kAvx2);
  EXPECT_EQ(kernels::active(), avx2 ? kernels::Isa::kAvx2 : kernels::Isa::kBaseline);
  EXPECT_TRUE(kernels::supported(kernels::Isa::kBaseline));
}

TEST(Metrics, EveryInstructionSetGivesBitIdenticalMetrics) {
  if (!kernels::supported(kernels::Isa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  std::vector<double> r, d;
  mixed_blocks(1200, 23, r, d);
  const MetricOptions tolerances[] = {{}, {0.0, 0x1p-10}, {1e-4, 1e-2}, {-1.0, 0.5}};
  for (const MetricOptions& options : tolerances) {
    SCOPED_TRACE(::testing::Message() << "atol " << options.atol << " rtol " << options.rtol);
    // Short tensors of one or two blocks: their figures come straight from the block sums, where
    // any difference in the order of additions would show (in a long tensor, the running double
    // sums round most of it away).
    std::mt19937 rng(7);
    for (size_t first = 0, size = 0; first < r.size(); first += size) {
      size = std::min<size_t>(r.size() - first, 16 + rng() % 500);
      const std::vector<double> rs(r.begin() + first, r.begin() + first + size);
      const std::vector<double> ds(d.begin() + first, d.begin() + first + size);
      SCOPED_TRACE(::testing::Message() << "pairs " << first << " + " << size);
      expect_identical(metrics_on(kernels::Isa::kBaseline, rs, ds, options, 1),
                       metrics_on(kernels::Isa::kAvx2, rs, ds, options, 1));
      if (::testing::Test::HasFailure()) return;  // one report is enough
    }
    // The whole input in chunks, one channel or three: the histogram's pair table, merges.
    for (uint32_t channels : {1u, 3u}) {
      SCOPED_TRACE(::testing::Message() << "channels " << channels);
      const Metrics baseline = metrics_on(kernels::Isa::kBaseline, r, d, options, channels);
      expect_identical(baseline, metrics_on(kernels::Isa::kAvx2, r, d, options, channels));
      EXPECT_GT(baseline.n, r.size() / 2);  // most pairs finite: the float pass did the work
    }
  }
}

// A float32 reference against dequantized device values that float cannot hold, at about 90 dB:
// the float pass must see each error to float precision of the error itself, not of the device
// value (rounded to float, these would be off by a percent), on every instruction set, with a
// float and a double side as the comparator passes them.
TEST(Metrics, DequantizedValuesKeepTheirPrecisionInTheFloatPass) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal(0, 1);
  const double scale = 0.0123456789, offset = -89;
  std::vector<double> d(100'000), r64(d.size());
  std::vector<float> r(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    const double q = std::nearbyint((40 + 10 * normal(rng)) / scale) - offset;
    d[i] = (q + offset) * scale;
    r[i] = static_cast<float>(d[i] + 1e-3 * normal(rng));
    r64[i] = r[i];
  }
  const Exact exact(r64, d);
  ASSERT_GT(exact.sqnr_db(), 80);
  Metrics per_isa[2];
  for (const kernels::Isa isa : {kernels::Isa::kBaseline, kernels::Isa::kAvx2}) {
    if (!kernels::supported(isa)) continue;
    const kernels::ScopedIsaForTesting scope(isa);
    MetricAccumulator acc;
    for (size_t first = 0; first < d.size(); first += 4096) {
      const size_t n = std::min<size_t>(4096, d.size() - first);
      acc.add(r.data() + first, d.data() + first, n, first);
    }
    per_isa[isa == kernels::Isa::kAvx2] = acc.finish(nullptr);
    expect_matches_exact(per_isa[isa == kernels::Isa::kAvx2], exact, r64, d);
  }
  if (kernels::supported(kernels::Isa::kAvx2)) expect_identical(per_isa[0], per_isa[1]);
}

// Blocks of zeros on both sides (a KV cache's unwritten slots) skip the float pass: they add only
// their counts. Against the same pairs without them (block-aligned, so every other block is cut
// the same way), every sum has the same bits; n, the close pairs and the histogram's bin 0 grow by
// the zeros. A float32 reference with -0 and +0, a Split device, as the comparator passes them.
TEST(Metrics, ZeroBlocksAddOnlyTheirCounts) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  constexpr size_t kBefore = 5 * kErrorBlock, kZeros = 9 * kErrorBlock, kAfter = 3000;
  std::vector<float> r(kBefore + kZeros + kAfter);
  std::vector<Split> d(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    const bool zero = i >= kBefore && i < kBefore + kZeros;
    r[i] = zero ? (i % 3 == 0 ? -0.0f : 0.0f) : normal(rng);
    d[i] = zero ? Split{} : Split::of(double(r[i]) * (1 + 0.01 * normal(rng)));
  }
  const MetricOptions tolerances[] = {{}, {0.0, 0.0}, {-1.0, 0.5}};
  for (const MetricOptions& options : tolerances) {
    MetricAccumulator with(options), without(options);
    with.add(r.data(), d.data(), r.size(), 0);
    without.add(r.data(), d.data(), kBefore, 0);
    without.add(r.data() + kBefore + kZeros, d.data() + kBefore + kZeros, kAfter, kBefore + kZeros);
    const Metrics a = with.finish(nullptr), b = without.finish(nullptr);
    EXPECT_EQ(a.n, b.n + kZeros);
    EXPECT_EQ(bits(a.sqnr_db), bits(b.sqnr_db));
    EXPECT_EQ(bits(a.l1_sum), bits(b.l1_sum));
    EXPECT_EQ(bits(a.cosine), bits(b.cosine));
    EXPECT_EQ(bits(a.max_abs), bits(b.max_abs));
    EXPECT_EQ(a.max_abs_index, b.max_abs_index);
    const bool zeros_close = options.atol >= 0;
    EXPECT_EQ(std::llround(a.allclose_frac * double(a.n)),
              std::llround(b.allclose_frac * double(b.n)) + (zeros_close ? long(kZeros) : 0));
    std::vector<uint64_t> histogram = b.error_histogram;
    histogram[0] += kZeros;
    EXPECT_EQ(a.error_histogram, histogram);
  }
  // Zeros alone: the first pair is the largest error, every pair close, every |e| in bin 0.
  MetricAccumulator zeros;
  zeros.add(r.data() + kBefore, d.data() + kBefore, kZeros, kBefore);
  const Metrics z = zeros.finish(nullptr);
  EXPECT_EQ(z.n, kZeros);
  EXPECT_EQ(z.max_abs_index, kBefore);
  EXPECT_EQ(z.max_abs, 0);
  EXPECT_EQ(z.allclose_frac, 1);
  EXPECT_EQ(z.sqnr_db, kInf);
  EXPECT_EQ(z.error_histogram[0], kZeros);
}

// Channels along the last axis (by rows) of a float32 reference and a Split device, as the
// comparator passes them: the AVX2 columns are the scalar columns, bit for bit, NaN and Inf
// pairs included, row lengths around the vector's four.
TEST(Metrics, ChannelColumnsAreBitIdenticalOnEveryInstructionSet) {
  if (!kernels::supported(kernels::Isa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0, 1);
  for (uint64_t channels : {uint64_t{7}, uint64_t{64}, uint64_t{1027}}) {
    std::vector<float> r(channels * 40);
    std::vector<Split> d(r.size());
    for (size_t i = 0; i < r.size(); ++i) {
      r[i] = normal(rng) * 3;
      d[i] = Split::of(double(r[i]) * (1 + 0.01 * normal(rng)) + 1e-9);
    }
    r[5] = kNanF;
    d[channels + 3] = Split{kInfF, 0};
    Metrics per_isa[2];
    for (int k = 0; k < 2; ++k) {
      const kernels::ScopedIsaForTesting scope(k == 0 ? kernels::Isa::kBaseline
                                                      : kernels::Isa::kAvx2);
      MetricAccumulator acc({}, ChannelMap{channels, 1});
      for (uint64_t at = 0; at < r.size(); at += 333) {
        const uint64_t n = std::min<uint64_t>(333, r.size() - at);
        acc.add(r.data() + at, d.data() + at, n, at);
      }
      per_isa[k] = acc.finish(nullptr);
    }
    ASSERT_EQ(per_isa[0].channels.size(), channels);
    expect_identical(per_isa[0], per_isa[1]);
  }
}

}  // namespace
}  // namespace qd::compare
