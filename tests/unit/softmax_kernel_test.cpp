// The token view's vector passes (compare/src/softmax_kernel.h): the exponential against libm's,
// the row sums against a plain float64 loop, and both instruction sets giving the same bits.
#include "softmax_kernel.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernel_dispatch.h"

namespace qd::compare {
namespace {

// Units in the last place between two positive doubles.
int64_t ulps_apart(double a, double b) {
  return std::abs(std::bit_cast<int64_t>(a) - std::bit_cast<int64_t>(b));
}

TEST(ExpNonpositive, IsWithinTwoUlpOfLibm) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> wide(-708.0, 0.0), near_zero(-1.0, 0.0);
  int64_t worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = i % 2 ? wide(random) : near_zero(random);
    worst = std::max(worst, ulps_apart(exp_nonpositive(x), std::exp(x)));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(exp_nonpositive(0.0), 1.0);
  EXPECT_EQ(exp_nonpositive(-0.0), 1.0);
}

TEST(ExpNonpositive, IsZeroWhereExpIsSubnormal) {
  EXPECT_GT(exp_nonpositive(-708.0), 0.0);
  EXPECT_EQ(exp_nonpositive(-708.5), 0.0);
  EXPECT_EQ(exp_nonpositive(-1e300), 0.0);
  EXPECT_EQ(exp_nonpositive(-INFINITY), 0.0);  // a masked class
}

std::vector<float> logits(size_t n, uint64_t seed, float spread) {
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> out(n);
  for (float& v : out) v = normal(random);
  return out;
}

TEST(RowExpSums, AreTheFloat64Sums) {
  for (const size_t n : {1u, 7u, 8u, 9u, 1000u, 151936u}) {
    const std::vector<float> x = logits(n, 1, 3.0f), y = logits(n, 2, 3.0f);
    const double x_top = *finite_maximum(x.data(), n), y_top = *finite_maximum(y.data(), n);
    EXPECT_EQ(x_top, *std::max_element(x.begin(), x.end()));
    double xs = 0, ys = 0, gap = 0;
    for (size_t c = 0; c < n; ++c) {
      const double w = std::exp(double(x[c]) - x_top);
      xs += w;
      ys += std::exp(double(y[c]) - y_top);
      gap += w * (double(x[c]) - double(y[c]));
    }
    const RowExpSums sums = row_exp_sums(x.data(), x_top, y.data(), y_top, n);
    EXPECT_NEAR(sums.x_sum, xs, 1e-12 * xs) << n;  // eight partial sums, not one
    EXPECT_NEAR(sums.y_sum, ys, 1e-12 * ys) << n;
    EXPECT_NEAR(sums.weighted_gap, gap, 1e-12 * xs * 10) << n;
  }
}

TEST(FiniteMaximum, RefusesNanAndInfinity) {
  std::vector<float> x = logits(100, 3, 1.0f);
  EXPECT_TRUE(finite_maximum(x.data(), x.size()).has_value());
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> with = x;
    with[57] = bad;
    EXPECT_FALSE(finite_maximum(with.data(), with.size()).has_value());
  }
  EXPECT_FALSE(finite_maximum(x.data(), 0).has_value());
}

TEST(RowExpSums, AreTheSameBitsOnEveryInstructionSet) {
  if (!kernels::supported(kernels::Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const size_t n : {3u, 8u, 13u, 4099u, 151936u}) {
    const std::vector<float> x = logits(n, 4, 5.0f), y = logits(n, 5, 5.0f);
    RowExpSums by_isa[2];
    std::optional<double> tops[2];
    for (const auto isa : {kernels::Isa::kBaseline, kernels::Isa::kAvx2}) {
      const kernels::ScopedIsaForTesting scope(isa);
      const int i = isa == kernels::Isa::kAvx2;
      tops[i] = finite_maximum(x.data(), n);
      by_isa[i] = row_exp_sums(x.data(), *tops[i], y.data(), *finite_maximum(y.data(), n), n);
    }
    EXPECT_EQ(tops[0], tops[1]);
    EXPECT_EQ(std::bit_cast<uint64_t>(by_isa[0].x_sum), std::bit_cast<uint64_t>(by_isa[1].x_sum));
    EXPECT_EQ(std::bit_cast<uint64_t>(by_isa[0].y_sum), std::bit_cast<uint64_t>(by_isa[1].y_sum));
    EXPECT_EQ(std::bit_cast<uint64_t>(by_isa[0].weighted_gap),
              std::bit_cast<uint64_t>(by_isa[1].weighted_gap));
  }
}

}  // namespace
}  // namespace qd::compare
