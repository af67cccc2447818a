#include "softmax_kernel.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernel_dispatch.h"
#include "lane_types.h"

namespace qd::compare {
namespace {

// Doubles in vector lanes (two for SSE2, four for AVX2): the same bits at both widths.
using namespace lanes;

// exp by Cody and Waite's reduction: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, then
// exp(r) by its Taylor series to degree 13 (the next term is below 2^-57 of the sum) and 2^n put
// in the exponent field. Rounding to the nearest integer adds 1.5 * 2^52 (the integer lands in the
// low bits), which needs no rounding instruction. ln2 is split so that n * hi is exact for every n
// here (hi has 32 trailing zero bits). Below -708, where exp is subnormal, the scale is 0.
// By reference: a 32-byte vector passed by value is an ABI that GCC warns of without AVX. The
// casts between vector types reinterpret the bits (GCC's vector extension).
template <class V, class U>
[[gnu::always_inline]] inline void exp_lanes(const V& x, V& out) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kShifter = 0x1.8p52;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kLowest = -708.0;  // exp(-708) is about 2^-1021.4: still normal
  const V lowest = V{} + kLowest;
  const V clamped = x > lowest ? x : lowest;
  const V shifted = clamped * kLog2e + kShifter;
  const V n = shifted - kShifter;
  const V r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  constexpr double kInverseFactorials[] = {1.0 / 479001600.0,
                                           1.0 / 39916800.0,
                                           1.0 / 3628800.0,
                                           1.0 / 362880.0,
                                           1.0 / 40320.0,
                                           1.0 / 5040.0,
                                           1.0 / 720.0,
                                           1.0 / 120.0,
                                           1.0 / 24.0,
                                           1.0 / 6.0,
                                           0.5,
                                           1.0,
                                           1.0};
  V p = V{} + 1.0 / 6227020800.0;  // 1/13!
  for (const double coefficient : kInverseFactorials) p = p * r + coefficient;
  const U shifter_bits = U{} + std::bit_cast<uint64_t>(kShifter);
  const U biased = ((U)shifted - shifter_bits + uint64_t{1023}) << 52;
  const U keep = (U)(x >= lowest);  // all ones, or 0 below kLowest
  const U scale_bits = biased & keep;
  out = p * (V)scale_bits;
}

// The scalar version: one lane of the same arithmetic.
double exp_one(double x) {
  D2 lanes;
  exp_lanes<D2, U2>(D2{} + x, lanes);
  return lanes[0];
}

// Partial sums: sixteen, so that the exponentials' chains of dependent steps overlap.
constexpr int kExpLanes = 16;

template <int kTag>
[[gnu::always_inline]] inline std::optional<double> maximum_body(const float* x, uint64_t n) {
  float top = -INFINITY;
  uint32_t non_finite = 0;
#pragma omp simd reduction(max : top) reduction(| : non_finite)
  for (uint64_t c = 0; c < n; ++c) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[c]);
    non_finite |= (bits & 0x7F800000u) == 0x7F800000u ? 1u : 0u;
    top = x[c] > top ? x[c] : top;
  }
  if (non_finite != 0 || n == 0) return std::nullopt;
  return static_cast<double>(top);
}

// kExpLanes partial sums, lane l holding the classes c with c % kExpLanes == l, in vectors of W
// doubles (the baseline's two, AVX2's four: the same sums either way); a tail shorter than that is
// padded with terms of 0.
template <class D, class U, class S, class F>
[[gnu::always_inline]] inline RowExpSums sums_body(const float* x, double x_top, const float* y,
                                                   double y_top, uint64_t n) {
  constexpr int kWidth = sizeof(D) / sizeof(double);
  constexpr int kVectors = kExpLanes / kWidth;
  D xs[kVectors] = {}, ys[kVectors] = {}, gaps[kVectors] = {};
  for (uint64_t c = 0; c < n; c += kExpLanes) {
    float xb[kExpLanes] = {}, yb[kExpLanes] = {};
    const uint64_t m = std::min<uint64_t>(kExpLanes, n - c);
    std::memcpy(xb, x + c, m * sizeof(float));
    std::memcpy(yb, y + c, m * sizeof(float));
    for (int h = 0; h < kVectors; ++h) {
      F xf, yf;
      std::memcpy(&xf, xb + kWidth * h, sizeof(xf));
      std::memcpy(&yf, yb + kWidth * h, sizeof(yf));
      const D xv = __builtin_convertvector(xf, D), yv = __builtin_convertvector(yf, D);
      D w, v;
      exp_lanes<D, U>(xv - x_top, w);
      exp_lanes<D, U>(yv - y_top, v);
      if (m < kExpLanes) {
        S lane;
        for (int l = 0; l < kWidth; ++l) lane[l] = kWidth * h + l;
        const D zero = {};
        w = lane < static_cast<int64_t>(m) ? w : zero;
        v = lane < static_cast<int64_t>(m) ? v : zero;
      }
      xs[h] += w;
      ys[h] += v;
      gaps[h] += w * (xv - yv);
    }
  }
  auto fold = [](const D* vectors) {
    double s[kExpLanes];
    std::memcpy(s, vectors, sizeof(s));
    for (int width = kExpLanes / 2; width > 0; width /= 2) {  // pairwise: s[l] + s[l + width]
      for (int l = 0; l < width; ++l) s[l] += s[l + width];
    }
    return s[0];
  };
  return {fold(xs), fold(ys), fold(gaps)};
}

std::optional<double> maximum_baseline(const float* x, uint64_t n) { return maximum_body<0>(x, n); }
RowExpSums sums_baseline(const float* x, double x_top, const float* y, double y_top, uint64_t n) {
  return sums_body<D2, U2, S2, F2>(x, x_top, y, y_top, n);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) std::optional<double> maximum_avx2(const float* x, uint64_t n) {
  return maximum_body<1>(x, n);
}
__attribute__((target("avx2"))) RowExpSums sums_avx2(const float* x, double x_top, const float* y,
                                                     double y_top, uint64_t n) {
  return sums_body<D4, U4, S4, F4>(x, x_top, y, y_top, n);
}
#endif

}  // namespace

double exp_nonpositive(double x) { return exp_one(x); }

std::optional<double> finite_maximum(const float* x, uint64_t n) {
#if defined(__x86_64__)
  if (kernels::active() == kernels::Isa::kAvx2) return maximum_avx2(x, n);
#endif
  return maximum_baseline(x, n);
}

RowExpSums row_exp_sums(const float* x, double x_top, const float* y, double y_top, uint64_t n) {
#if defined(__x86_64__)
  if (kernels::active() == kernels::Isa::kAvx2) return sums_avx2(x, x_top, y, y_top, n);
#endif
  return sums_baseline(x, x_top, y, y_top, n);
}

}  // namespace qd::compare
