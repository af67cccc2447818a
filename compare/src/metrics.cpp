#include "qnn_debug/compare/metrics.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "kernel_dispatch.h"
#include "lane_types.h"
#include "qnn_debug/compare/kv_cache.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace qd::compare {
namespace {

// Pairs per float block: the unit of the validity check and of the fallback to double.
constexpr uint32_t kBlock = kErrorBlock;
// The float pass has eight lanes whatever the vector width: lane i takes the pairs j of each
// sub-block with j mod 8 = i (docs/metrics.md, "Determinism"). Float blocks hold a multiple of
// kLanes pairs; the last up to kLanes - 1 pairs of a run take the exact path.
constexpr uint32_t kLanes = 8;
// Float partial sums are folded into double every kSub pairs: no float partial chains more than
// kSub / kLanes = 8 additions (docs/metrics.md, "Accuracy"). 32 pairs would chain only 4; 64
// folds half as often, which is measurably faster, and stays within the documented bound.
constexpr uint32_t kSub = 64;
// Bounds of the largest error kept per channel run (MetricAccumulator::add): the runs of the
// comparator's pieces (kErrorBlock x 32 pairs) always fit.
constexpr uint64_t kRunBounds = 40;
// Runs of one channel shorter than this go straight to the double path.
constexpr uint64_t kMinFastRun = 16;
// A block sum of squares below this (but not zero) may hide squares that underflowed float: the
// block is redone in double. Above it, a square that underflowed is < 2^-58 of the sum.
constexpr double kSmallestFloatSum = 0x1p-60;
// The float allclose test decides a pair only when |e| and the threshold are more than this many
// units in the last place apart; otherwise the block is decided in double.
constexpr int32_t kUlpMargin = 16;
// The float pass switches its histogram to the pair table after this many pairs.
constexpr uint64_t kPairTableAfter = uint64_t{1} << 17;
// The pair table's 32-bit counts are folded into the 64-bit histogram before they could wrap.
constexpr uint64_t kPairTableFold = uint64_t{1} << 31;

constexpr double kInf = std::numeric_limits<double>::infinity();
// Values beyond the float range count as infinite (docs/metrics.md, "Decoding"): the reach of a
// float32 device or reference, and what keeps every square and sum far from double overflow.
constexpr double kFloatMax = std::numeric_limits<float>::max();

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// The order of "largest error": the larger float-rounded |e|, then the lower index.
inline bool beats(float key, uint64_t index, float best_key, uint64_t best_index) {
  return key > best_key || (key == best_key && index < best_index);
}

struct BlockSums {
  double r2 = 0, d2 = 0, e2 = 0, abs_e = 0, rd = 0;
  float max_e = 0;
  int32_t sure = 0;   // pairs certainly within tolerance
  int32_t maybe = 0;  // pairs possibly within tolerance
};

// The float pass is written once for GCC/Clang vector extensions and instantiated for two
// widths: four-lane vectors (SSE2 on generic x86-64, NEON on arm64), two per step of eight pairs,
// and on x86-64 eight-lane AVX2 vectors, one per step. It is written by hand rather than left to
// `omp simd` so that every lane adds the same terms in the same order, and the lanes are folded
// into double in the same order, at both widths: the results are bit-identical.
using namespace lanes;

// The integer and double vector types that go with float vector F, and the double accumulator of
// a sum: four double lanes, as two vectors or one.
template <class F>
struct VectorTypes;
template <>
struct VectorTypes<F4> {
  using I = I4;   // same lanes as int32
  using W = W4;   // the same as uint32: wrapping arithmetic
  using U = U2;   // same bytes as uint64 lanes
  using D = D2;   // half the lanes as double
  using FH = F2;  // half the lanes as float
  static constexpr int kDoubleVectors = 2;
};
#if defined(__x86_64__)
template <>
struct VectorTypes<F8> {
  using I = I8;
  using W = W8;
  using U = U4;
  using D = D4;
  using FH = F4;
  static constexpr int kDoubleVectors = 1;
};
#endif

// Everything below up to float_block_with is always inlined into the instantiations, so that the
// AVX2 one is compiled for AVX2 throughout. No function takes or returns an eight-lane vector by
// value: that would be an AVX argument in code compiled without AVX (GCC's -Wpsabi).

// Per-lane float partial sums of one sub-block.
template <class F>
struct Partials {
  F r2{}, d2{}, e2{}, abs_e{}, rd{};
};

// Per-lane largest |e| and allclose counts. Their order does not matter, so they are merged
// freely: per pass over a sub-block (so that they stay in registers), then across the block.
template <class F>
struct Extremes {
  using I = typename VectorTypes<F>::I;
  F max_e{};
  I sure{}, maybe{};

  [[gnu::always_inline]] void merge(const Extremes& other) {
    max_e = other.max_e > max_e ? other.max_e : max_e;
    sure += other.sure;
    maybe += other.maybe;
  }
};

struct Tolerances {
  float atol, rtol;
};

template <class R, class Dv>
inline constexpr bool kBothFloat = std::is_same_v<R, float>&& std::is_same_v<Dv, float>;

// Two half vectors as one.
template <class F, class FH>
[[gnu::always_inline]] inline void join(const FH& low, const FH& high, F& out) {
  if constexpr (sizeof(FH) == 8) {
    out = __builtin_shufflevector(low, high, 0, 1, 2, 3);
  } else {
    out = __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7);
  }
}

// W values at p as floats: float values as they are (lo stays 0); a double v as hi = float(v) and
// lo = float(v - hi), which together hold v to about 2^-48 of it (docs/metrics.md, "Accuracy").
template <class F, class In>
[[gnu::always_inline]] inline void load_split(const In* p, F& hi, F& lo) {
  if constexpr (std::is_same_v<In, float>) {
    std::memcpy(&hi, p, sizeof(hi));
  } else if constexpr (std::is_same_v<In, Split>) {  // (hi, lo) pairs: the even and odd floats
    F a, b;
    std::memcpy(&a, p, sizeof(a));
    std::memcpy(&b, reinterpret_cast<const float*>(p) + sizeof(F) / sizeof(float), sizeof(b));
    if constexpr (sizeof(F) == 16) {
      hi = __builtin_shufflevector(a, b, 0, 2, 4, 6);
      lo = __builtin_shufflevector(a, b, 1, 3, 5, 7);
    } else {  // within 128-bit lanes first (vshufps), then the 64-bit halves in order (vpermpd)
      const F even = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14);
      const F odd = __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
      hi = __builtin_shufflevector(even, even, 0, 1, 4, 5, 2, 3, 6, 7);
      lo = __builtin_shufflevector(odd, odd, 0, 1, 4, 5, 2, 3, 6, 7);
    }
  } else {
    using D = typename VectorTypes<F>::D;
    using FH = typename VectorTypes<F>::FH;
    D v0, v1;
    std::memcpy(&v0, p, sizeof(v0));
    std::memcpy(&v1, p + sizeof(D) / sizeof(double), sizeof(v1));
    const FH h0 = __builtin_convertvector(v0, FH), h1 = __builtin_convertvector(v1, FH);
    join(h0, h1, hi);
    join(__builtin_convertvector(v0 - __builtin_convertvector(h0, D), FH),
         __builtin_convertvector(v1 - __builtin_convertvector(h1, D), FH), lo);
  }
}

// One value as the float pass sees it (the same operations as load_split, one lane).
template <class In>
inline void split(In v, float& hi, float& lo) {
  if constexpr (std::is_same_v<In, Split>) {
    hi = v.hi;
    lo = v.lo;
  } else {
    hi = static_cast<float>(v);
    lo = std::is_same_v<In, float> ? 0.0f : static_cast<float>(static_cast<double>(v) - double(hi));
  }
}

// e = d - r as the float pass computes it: (d_hi - r_hi) + (d_lo - r_lo). d_hi - r_hi is exact
// when the two are within a factor of two (Sterbenz), so e carries about one float rounding of
// itself, not one of d: what lets dequantized values be compared in float lanes.
template <class R, class Dv>
inline float float_error(R r, Dv d) {
  float a, a_lo, b, b_lo;
  split(r, a, a_lo);
  split(d, b, b_lo);
  float e = b - a;
  if constexpr (!kBothFloat<R, Dv>) e = e + (b_lo - a_lo);
  return e;
}

// One vector of pairs: r[0, W), d[0, W) for a W-lane F. Writes W / 2 keys (see float_block_with).
template <class F, class R, class Dv>
[[gnu::always_inline]] inline void step(const R* r, const Dv* d, Tolerances tol, Partials<F>& p,
                                        Extremes<F>& x, uint64_t* keys) {
  using I = typename VectorTypes<F>::I;
  using W = typename VectorTypes<F>::W;
  using U = typename VectorTypes<F>::U;
  F a, b, a_lo{}, b_lo{};
  load_split(r, a, a_lo);
  load_split(d, b, b_lo);
  F e = b - a;
  if constexpr (!kBothFloat<R, Dv>) e = e + (b_lo - a_lo);
  const F ae = reinterpret_cast<F>(reinterpret_cast<I>(e) & 0x7FFFFFFF);
  const F abs_a = reinterpret_cast<F>(reinterpret_cast<I>(a) & 0x7FFFFFFF);
  p.r2 += a * a;
  p.d2 += b * b;
  p.e2 += e * e;
  p.abs_e += ae;
  p.rd += a * b;
  x.max_e = ae > x.max_e ? ae : x.max_e;
  // allclose: non-negative floats order like their bit patterns, so the difference of the
  // patterns counts units in the last place. A true comparison is -1.
  // Subtracted as unsigned lanes: NaN patterns minus a negative bound would overflow int32.
  const I ulps = reinterpret_cast<I>(
      reinterpret_cast<W>(ae) - reinterpret_cast<W>((F{} + tol.atol) + (F{} + tol.rtol) * abs_a));
  x.sure -= (I{} + (1 - kUlpMargin)) > ulps;  // ulps < 1 - K: ulps <= -K
  x.maybe -= (I{} + (1 + kUlpMargin)) > ulps;
  // Exponent fields e0, e1, ... (sign bit clear): as 64-bit lanes e0 | e1 << 32, ...;
  // x | x >> 24 puts e0 | e1 << 8 in the low 16 bits of each.
  const U exponents = reinterpret_cast<U>(reinterpret_cast<I>(ae) >> 23);
  const U pair_keys = exponents | (exponents >> 24);
  std::memcpy(keys, &pair_keys, sizeof(pair_keys));
}

// The five double accumulators, each as four double lanes: after each sub-block, double lane k
// adds float lane k, then float lane k + 4.
template <class F>
struct DoubleSums {
  using D = typename VectorTypes<F>::D;
  static constexpr int kVectors = VectorTypes<F>::kDoubleVectors;
  D r2[kVectors]{}, d2[kVectors]{}, e2[kVectors]{}, abs_e[kVectors]{}, rd[kVectors]{};
};

// Four float lanes as double: lanes 0, 1 and lanes 2, 3.
[[gnu::always_inline]] inline D2 low_half(F4 v) {
#if defined(__SSE2__)  // GCC makes poor code of the generic form below for the upper half
  return reinterpret_cast<D2>(_mm_cvtps_pd(reinterpret_cast<__m128>(v)));
#else
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), D2);
#endif
}
[[gnu::always_inline]] inline D2 high_half(F4 v) {
#if defined(__SSE2__)
  const __m128 x = reinterpret_cast<__m128>(v);
  return reinterpret_cast<D2>(_mm_cvtps_pd(_mm_movehl_ps(x, x)));
#else
  return __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), D2);
#endif
}

// Adds four float lanes (lanes 0-3 or 4-7 of the eight) into the four double lanes.
[[gnu::always_inline]] inline void fold(F4 lanes, D2 (&sums)[2]) {
  sums[0] += low_half(lanes);
  sums[1] += high_half(lanes);
}
[[gnu::always_inline]] inline double total(const D2 (&sums)[2]) {
  const D2 pairs = sums[0] + sums[1];  // lanes 0 + 2 and 1 + 3
  return pairs[0] + pairs[1];
}

#if defined(__x86_64__)
// The same for all eight lanes in one vector: lanes 0-3, then 4-7, as above. (GCC converts the
// whole vector with two vcvtps2pd; converting each half on its own splits it further.)
[[gnu::always_inline]] inline void fold(const F8& lanes, D4 (&sums)[1]) {
  using D8 = double __attribute__((vector_size(64)));
  const D8 v = __builtin_convertvector(lanes, D8);
  sums[0] += __builtin_shufflevector(v, v, 0, 1, 2, 3);
  sums[0] += __builtin_shufflevector(v, v, 4, 5, 6, 7);
}
[[gnu::always_inline]] inline double total(const D4 (&sums)[1]) {
  const D4 v = sums[0];
  const D2 pairs = __builtin_shufflevector(v, v, 0, 1) + __builtin_shufflevector(v, v, 2, 3);
  return pairs[0] + pairs[1];
}
#endif

template <class F>
[[gnu::always_inline]] inline void fold_partials(const Partials<F>& p, DoubleSums<F>& s) {
  fold(p.r2, s.r2);
  fold(p.d2, s.d2);
  fold(p.e2, s.e2);
  fold(p.abs_e, s.abs_e);
  fold(p.rd, s.rd);
}

// The sum of every lane of every vector: max and counts, where the order does not matter.
template <class F>
[[gnu::always_inline]] inline void finish_extremes(const Extremes<F>& x, BlockSums& block) {
  // Copied out rather than indexed: indexing keeps x in memory, which GCC then zeroes with a slow
  // `rep stos` on every call.
  constexpr int kWidth = sizeof(F) / sizeof(float);
  float max_e[kWidth];
  int32_t sure[kWidth], maybe[kWidth];
  std::memcpy(max_e, &x.max_e, sizeof(max_e));
  std::memcpy(sure, &x.sure, sizeof(sure));
  std::memcpy(maybe, &x.maybe, sizeof(maybe));
  for (int i = 0; i < kWidth; ++i) {
    block.max_e = std::max(block.max_e, max_e[i]);
    block.sure += sure[i];
    block.maybe += maybe[i];
  }
}

// Float pass over `count` pairs (a multiple of kLanes, at most kBlock) with W-lane vectors F.
// Non-finite values and float overflow show up as non-finite sums, which the caller checks. The
// low 16 bits of keys[k] receive the exponent fields of |e| of pairs 2k and 2k + 1 as e0 | e1 << 8
// (the upper bits are junk, the same junk at every width).
template <class F, class R, class Dv>
[[gnu::always_inline]] inline BlockSums float_block_with(const R* r, const Dv* d, uint32_t count,
                                                         Tolerances tol, uint64_t* keys) {
  constexpr uint32_t kWidth = sizeof(F) / sizeof(float);
  constexpr int kVectors = kLanes / kWidth;  // per step of kLanes pairs
  DoubleSums<F> sums;
  Extremes<F> extremes;
  for (uint32_t s = 0; s < count; s += kSub) {
    const uint32_t end = std::min(count, s + kSub);
    // Vector v holds lanes v W .. v W + W - 1 of each step: one pass over the sub-block per vector
    // keeps only one vector's partials live (SSE2 has 16 registers).
#pragma GCC unroll 2  // kVectors: GCC leaves a loop over v with its partials in memory
    for (int v = 0; v < kVectors; ++v) {
      Partials<F> partials;
      Extremes<F> pass_extremes;
      for (uint32_t j = s + static_cast<uint32_t>(v) * kWidth; j < end; j += kLanes) {
        step(r + j, d + j, tol, partials, pass_extremes, keys + j / 2);
      }
      fold_partials(partials, sums);
      extremes.merge(pass_extremes);
    }
  }
  BlockSums block;
  block.r2 = total(sums.r2);
  block.d2 = total(sums.d2);
  block.e2 = total(sums.e2);
  block.abs_e = total(sums.abs_e);
  block.rd = total(sums.rd);
  finish_extremes(extremes, block);
  return block;
}

// One instantiation per pair of input types (a float32 side is read as stored, any other decoded
// to Split; doubles are taken too) and width.
template <class R, class Dv>
using FloatBlock = BlockSums (*)(const R*, const Dv*, uint32_t, Tolerances, uint64_t*);

template <class R, class Dv>
BlockSums float_block_baseline(const R* r, const Dv* d, uint32_t count, Tolerances tol,
                               uint64_t* keys) {
  return float_block_with<F4>(r, d, count, tol, keys);
}

#if defined(__x86_64__)
// No "fma" in the target: -ffp-contract=off keeps products and sums apart anyway, and the
// baseline has no FMA to match.
template <class R, class Dv>
__attribute__((target("avx2"))) BlockSums float_block_avx2(const R* r, const Dv* d, uint32_t count,
                                                           Tolerances tol, uint64_t* keys) {
  return float_block_with<F8>(r, d, count, tol, keys);
}
#endif

template <class R, class Dv>
FloatBlock<R, Dv> float_block_for(kernels::Isa isa) {
#if defined(__x86_64__)
  if (isa == kernels::Isa::kAvx2) return float_block_avx2<R, Dv>;
#endif
  (void)isa;
  return float_block_baseline<R, Dv>;
}

// True when some value of x[0, count) is not +-0. No early exit: a block of zeros (a KV cache's
// unwritten slots) is the common case, and a vector pass over it is cheaper than a branch per
// value. A Split is zero when lo = -hi (their sum is exact), which compares in float.
inline int nonzero(float v) { return v != 0 ? 1 : 0; }
inline int nonzero(double v) { return v != 0 ? 1 : 0; }
inline int nonzero(const Split& v) { return v.hi != -v.lo ? 1 : 0; }
template <class In>
bool any_nonzero(const In* x, uint32_t count) {
  int found = 0;
#pragma omp simd reduction(| : found)
  for (uint32_t j = 0; j < count; ++j) found |= nonzero(x[j]);
  return found != 0;
}

// True when every value of x[0, count) is +0 or -0 in every part (both floats of a Split): a block
// the float pass would add only zeros from. One vector pass over the bits, no branch per value.
template <int kTag, class In>
[[gnu::always_inline]] inline bool all_zero_body(const In* x, uint32_t count) {
  if constexpr (std::is_same_v<In, double>) {
    uint64_t bits = 0;
#pragma omp simd reduction(| : bits)
    for (uint32_t j = 0; j < count; ++j) bits |= std::bit_cast<uint64_t>(x[j]);
    return (bits & ~(uint64_t{1} << 63)) == 0;
  } else {
    static_assert(sizeof(In) % sizeof(uint32_t) == 0);
    const auto* words = reinterpret_cast<const uint32_t*>(x);  // a float, or a Split's two
    uint32_t bits = 0;
    const uint32_t word_count = count * static_cast<uint32_t>(sizeof(In) / sizeof(uint32_t));
#pragma omp simd reduction(| : bits)
    for (uint32_t j = 0; j < word_count; ++j) bits |= words[j];
    return (bits & 0x7FFFFFFFu) == 0;
  }
}

template <class In>
bool all_zero_baseline(const In* x, uint32_t count) {
  return all_zero_body<0>(x, count);
}

#if defined(__x86_64__)
template <class In>
__attribute__((target("avx2"))) bool all_zero_avx2(const In* x, uint32_t count) {
  return all_zero_body<1>(x, count);
}
#endif

template <class In>
bool all_zero(const In* x, uint32_t count) {
#if defined(__x86_64__)
  if (kernels::active() == kernels::Isa::kAvx2) return all_zero_avx2(x, count);
#endif
  return all_zero_baseline(x, count);
}

// True when the float sums of the block are as good as double ones: nothing overflowed or was
// non-finite, and no sum of squares is so small that squares may have underflowed (a sum below
// kSmallestFloatSum is trusted only when it is zero because every value is zero).
template <class R, class Dv>
bool float_block_valid(const BlockSums& b, const R* r, const Dv* d, uint32_t count) {
  const bool finite = std::isfinite(b.r2) && std::isfinite(b.d2) && std::isfinite(b.e2) &&
                      std::isfinite(b.abs_e) && std::isfinite(b.rd);
  if (!finite) return false;
  if (b.e2 < kSmallestFloatSum && b.max_e > 0) return false;
  if (b.r2 < kSmallestFloatSum && (b.r2 > 0 || any_nonzero(r, count))) return false;
  if (b.d2 < kSmallestFloatSum && (b.d2 > 0 || any_nonzero(d, count))) return false;
  return true;
}

// A bound on the largest exact |e| of a block from its float pass: the float |e| is within 2^-23
// of the exact one, plus what the split leaves out of each value (2^-48 of it, docs/metrics.md
// section 4), and every value is at most sqrt(r2 + d2).
double error_bound(const BlockSums& b) {
  return double(b.max_e) * (1 + 0x1p-20) + 0x1p-44 * std::sqrt(b.r2 + b.d2);
}

// Adds the 65536 pair counts to a 256-bucket exponent histogram.
void fold_pairs(const std::vector<uint32_t>& pairs, std::array<uint64_t, 256>& histogram) {
  if (pairs.empty()) return;
  for (size_t high = 0; high < 256; ++high) {
    const uint32_t* row = pairs.data() + high * 256;
    uint64_t row_sum = 0;
    for (size_t low = 0; low < 256; ++low) {
      row_sum += row[low];
      histogram[low] += row[low];
    }
    histogram[high] += row_sum;
  }
}

struct Figures {
  double sqnr_db, mse, rmse, mae, rel_l2, cosine, allclose_frac;
};

// The figures of a set of sums, with the conventions of docs/metrics.md for degenerate sums.
Figures figures_of(const MetricAccumulator::Sums& s) {
  Figures f{};
  const auto n = static_cast<double>(s.n);
  f.sqnr_db = sqnr_of(s.r2, s.e2);
  f.mse = s.n ? s.e2 / n : 0;
  f.rmse = std::sqrt(f.mse);
  f.mae = s.n ? s.abs_e / n : 0;
  f.rel_l2 = s.e2 == 0 ? 0 : s.r2 == 0 ? kInf : std::sqrt(s.e2 / s.r2);
  if (s.r2 == 0 || s.d2 == 0) {
    f.cosine = s.r2 == s.d2 ? 1 : 0;  // both all-zero: 1; exactly one: 0
  } else if (s.e2 == 0) {
    f.cosine = 1;  // identical
  } else {
    f.cosine = std::clamp(s.rd / (std::sqrt(s.r2) * std::sqrt(s.d2)), -1.0, 1.0);
  }
  f.allclose_frac = s.n ? static_cast<double>(s.close) / n : 1;
  return f;
}

}  // namespace

double sqnr_of(double signal, double noise) {
  return noise == 0 ? kInf : signal == 0 ? -kInf : 10.0 * std::log10(signal / noise);
}

void MetricAccumulator::Sums::merge(const Sums& other) {
  r2 += other.r2;
  d2 += other.d2;
  e2 += other.e2;
  abs_e += other.abs_e;
  rd += other.rd;
  n += other.n;
  close += other.close;
  if (other.n > 0 && beats(other.max_key, other.max_index, max_key, max_index)) {
    max_key = other.max_key;
    max_abs = other.max_abs;
    max_index = other.max_index;
  }
}

MetricAccumulator::MetricAccumulator(MetricOptions options, ChannelMap channels)
    : options_(options),
      map_{std::max<uint64_t>(channels.count, 1), std::max<uint64_t>(channels.inner, 1),
           std::max<uint64_t>(channels.heads, 1), channels.heads_inner} {
  const double atol = options.atol;
  const double rtol = options.rtol;
  tolerance_.fast = std::isfinite(atol) && std::isfinite(rtol) && atol >= 0 && rtol >= 0 &&
                    atol <= 1e30 && rtol <= 1e30;
  if (tolerance_.fast) {
    tolerance_.atol = static_cast<float>(atol);
    tolerance_.rtol = static_cast<float>(rtol);
  }
  sums_.resize(by_rows() ? 1 : map_.count);
  if (by_rows()) {
    columns_.r2.assign(map_.count, 0);
    columns_.e2.assign(map_.count, 0);
    columns_.abs_e.assign(map_.count, 0);
    columns_.max_abs.assign(map_.count, 0);
    columns_.n.assign(map_.count, 0);
  }
}

bool MetricAccumulator::by_rows() const { return map_.count > 1 && map_.inner < kMinFastRun; }

template <class R, class D>
void MetricAccumulator::add(const R* r, const D* d, uint64_t count, uint64_t first,
                            double* block_bounds) {
  elements_ += count;
  if (map_.count == 1 || by_rows()) {
    add_run(r, d, count, first, sums_[0], block_bounds);
    if (by_rows()) add_rows(r, d, count, first);
    return;
  }
  // Channel runs start blocks of their own, out of step with the caller's: a caller's block is
  // bounded by the largest bound of the run blocks it overlaps.
  if (block_bounds != nullptr) std::fill_n(block_bounds, (count + kBlock - 1) / kBlock, 0.0);
  for (uint64_t i = 0; i < count;) {
    const uint64_t element = first + i;
    const uint64_t run = std::min(map_.inner - element % map_.inner, count - i);
    double run_bounds[kRunBounds];
    const bool bounded = block_bounds != nullptr && run <= kRunBounds * kBlock;
    add_run(r + i, d + i, run, element, sums_[(element / map_.inner) % map_.count],
            bounded ? run_bounds : nullptr);
    for (uint64_t at = 0; block_bounds != nullptr && at < run; at += kBlock) {
      const double bound = bounded ? run_bounds[at / kBlock] : kInf;
      const uint64_t last = i + std::min(at + kBlock, run) - 1;  // in the caller's blocks
      for (uint64_t b = (i + at) / kBlock; b <= last / kBlock; ++b) {
        block_bounds[b] = std::max(block_bounds[b], bound);
      }
    }
    i += run;
  }
}

namespace {

// Adds pairs r[k], d[k] of consecutive channels c0 + k to the columns (the channel axis last).
template <class R, class D>
void add_row_piece_scalar(const R* r, const D* d, uint64_t count, uint64_t c0,
                          MetricAccumulator::ChannelColumns& columns) {
  double* r2 = columns.r2.data() + c0;
  double* e2 = columns.e2.data() + c0;
  double* abs_e = columns.abs_e.data() + c0;
  double* max_abs = columns.max_abs.data() + c0;
  uint64_t* n = columns.n.data() + c0;
#pragma omp simd
  for (uint64_t k = 0; k < count; ++k) {
    const double a = static_cast<double>(r[k]);
    const double b = static_cast<double>(d[k]);
    const bool finite = std::fabs(a) <= kFloatMax && std::fabs(b) <= kFloatMax;
    const double e = finite ? b - a : 0.0;
    const double ae = std::fabs(e);
    r2[k] += finite ? a * a : 0.0;
    e2[k] += e * e;
    abs_e[k] += ae;
    max_abs[k] = ae > max_abs[k] ? ae : max_abs[k];
    n[k] += finite ? 1 : 0;
  }
}

#if defined(__x86_64__)
// add_row_piece_scalar of a float32 reference and a Split device (the compiler keeps that loop
// scalar) four columns at a time: each column still adds its own pairs in order, with the same
// operations, so the same bits.
__attribute__((target("avx2"))) void add_row_piece_avx2(const float* r, const Split* d,
                                                        uint64_t count, uint64_t c0,
                                                        MetricAccumulator::ChannelColumns& c) {
  const __m256d sign = _mm256_set1_pd(-0.0), limit = _mm256_set1_pd(kFloatMax);
  const __m256i halves = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);  // the his, then the los
  uint64_t k = 0;
  for (; k + 4 <= count; k += 4) {
    const uint64_t at = c0 + k;
    const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(r + k));
    const __m256 parts = _mm256_permutevar8x32_ps(_mm256_loadu_ps(&d[k].hi), halves);
    const __m256d b = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(parts)),
                                    _mm256_cvtps_pd(_mm256_extractf128_ps(parts, 1)));
    const __m256d finite =
        _mm256_and_pd(_mm256_cmp_pd(_mm256_andnot_pd(sign, a), limit, _CMP_LE_OQ),
                      _mm256_cmp_pd(_mm256_andnot_pd(sign, b), limit, _CMP_LE_OQ));
    const __m256d e = _mm256_and_pd(_mm256_sub_pd(b, a), finite);
    const __m256d ae = _mm256_andnot_pd(sign, e);
    const __m256d r2 = _mm256_and_pd(_mm256_mul_pd(a, a), finite);
    _mm256_storeu_pd(&c.r2[at], _mm256_add_pd(_mm256_loadu_pd(&c.r2[at]), r2));
    _mm256_storeu_pd(&c.e2[at], _mm256_add_pd(_mm256_loadu_pd(&c.e2[at]), _mm256_mul_pd(e, e)));
    _mm256_storeu_pd(&c.abs_e[at], _mm256_add_pd(_mm256_loadu_pd(&c.abs_e[at]), ae));
    const __m256d max = _mm256_loadu_pd(&c.max_abs[at]);
    _mm256_storeu_pd(&c.max_abs[at], _mm256_blendv_pd(max, ae, _mm256_cmp_pd(ae, max, _CMP_GT_OQ)));
    auto* n = reinterpret_cast<__m256i*>(&c.n[at]);
    _mm256_storeu_si256(n, _mm256_sub_epi64(_mm256_loadu_si256(n), _mm256_castpd_si256(finite)));
  }
  add_row_piece_scalar(r + k, d + k, count - k, c0 + k, c);
}
#endif

template <class R, class D>
void add_row_piece(const R* r, const D* d, uint64_t count, uint64_t c0,
                   MetricAccumulator::ChannelColumns& columns) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<R, float> && std::is_same_v<D, Split>) {
    if (kernels::active() == kernels::Isa::kAvx2)
      return add_row_piece_avx2(r, d, count, c0, columns);
  }
#endif
  add_row_piece_scalar(r, d, count, c0, columns);
}

}  // namespace

template <class R, class D>
void MetricAccumulator::add_rows(const R* r, const D* d, uint64_t count, uint64_t first) {
  if (map_.inner == 1) {
    uint64_t channel = first % map_.count;
    for (uint64_t i = 0; i < count;) {
      const uint64_t piece = std::min(map_.count - channel, count - i);
      add_row_piece(r + i, d + i, piece, channel, columns_);
      i += piece;
      channel = 0;
    }
    return;
  }
  uint64_t channel = (first / map_.inner) % map_.count;
  uint64_t position = first % map_.inner;
  for (uint64_t i = 0; i < count; ++i) {
    add_row_piece(r + i, d + i, 1, channel, columns_);
    if (++position == map_.inner) {
      position = 0;
      channel = channel + 1 == map_.count ? 0 : channel + 1;
    }
  }
}

template <class R, class D>
void MetricAccumulator::add_run(const R* r, const D* d, uint64_t count, uint64_t first, Sums& sums,
                                double* block_bounds) {
  const uint64_t block_part = count < kMinFastRun ? 0 : count & ~uint64_t{kLanes - 1};
  for (uint64_t done = 0; done < block_part; done += kBlock) {
    const auto m = static_cast<uint32_t>(std::min<uint64_t>(kBlock, block_part - done));
    const double bound = add_block(r + done, d + done, m, first + done, sums);
    if (block_bounds != nullptr) block_bounds[done / kBlock] = bound;
  }
  if (count > block_part) {
    add_exact(r + block_part, d + block_part, count - block_part, first + block_part, sums);
    if (block_bounds != nullptr) block_bounds[block_part / kBlock] = kInf;
  }
}

template <class R, class D>
double MetricAccumulator::add_block(const R* r, const D* d, uint32_t count, uint64_t first,
                                    Sums& sums) {
  if (all_zero(r, count) && all_zero(d, count)) return add_zero_block(count, first, sums);
  uint64_t keys[kBlock / 2];
  const FloatBlock<R, D> float_block = float_block_for<R, D>(kernels::active());
  const BlockSums b = float_block(r, d, count, {tolerance_.atol, tolerance_.rtol}, keys);
  if (!float_block_valid(b, r, d, count)) {
    add_exact(r, d, count, first, sums);
    return kInf;
  }
  sums.r2 += b.r2;
  sums.d2 += b.d2;
  sums.e2 += b.e2;
  sums.abs_e += b.abs_e;
  sums.rd += b.rd;
  sums.n += count;
  if (tolerance_.fast && b.sure == b.maybe) {
    sums.close += static_cast<uint64_t>(b.sure);
  } else {  // a pair within the margin of the float test: decide the block in double
    const double atol = options_.atol;
    const double rtol = options_.rtol;
    uint64_t close = 0;
    for (uint32_t j = 0; j < count; ++j) {
      const auto a = static_cast<double>(r[j]);
      close += std::fabs(static_cast<double>(d[j]) - a) <= atol + rtol * std::fabs(a) ? 1 : 0;
    }
    sums.close += close;
  }
  // The first pair of the block with the block's largest float |e|, if it beats the current one.
  if (beats(b.max_e, first, sums.max_key, sums.max_index)) {
    for (uint32_t j = 0; j < count; ++j) {
      if (std::fabs(float_error(r[j], d[j])) != b.max_e) continue;
      if (beats(b.max_e, first + j, sums.max_key, sums.max_index)) {
        sums.max_key = b.max_e;
        sums.max_index = first + j;
        sums.max_abs = std::fabs(static_cast<double>(d[j]) - static_cast<double>(r[j]));
      }
      break;
    }
  }

  const uint32_t key_count = count / 2;
  if (pair_counts_.empty() && float_pass_pairs_ >= kPairTableAfter) pair_counts_.assign(65536, 0);
  if (b.max_e == 0) {
    // Every |e| is zero, exponent field 0 (a KV cache's unwritten slots, a copy): counted at
    // once, where a scatter into one counter would wait on itself at every increment.
    exponent_counts_[0][0] += count;
  } else if (!pair_counts_.empty()) {
    uint32_t* table = pair_counts_.data();
    for (uint32_t k = 0; k < key_count; k += 2) {
      ++table[static_cast<uint16_t>(keys[k])];
      ++table[static_cast<uint16_t>(keys[k + 1])];
    }
    pair_counts_total_ += key_count;
    if (pair_counts_total_ >= kPairTableFold) flush_pair_counts();
  } else {
    for (uint32_t k = 0; k < key_count; ++k) {
      ++exponent_counts_[0][keys[k] & 0xFF];
      ++exponent_counts_[1][(keys[k] >> 8) & 0xFF];
    }
  }
  float_pass_pairs_ += count;
  return error_bound(b);
}

// What the float pass and the steps after it make of a block of zeros on both sides (a KV cache's
// unwritten slots), without the pass: every sum gets +0, which leaves it as it is (no sum is ever
// -0: each starts at +0 and adds squares, or products that sum to +0); every pair is close as the
// double test has it (the float test agrees with it); the first pair is the largest error of 0;
// every float |e| has exponent field 0; the bound on the largest error is 0.
double MetricAccumulator::add_zero_block(uint32_t count, uint64_t first, Sums& sums) {
  sums.n += count;
  sums.close += 0.0 <= options_.atol + options_.rtol * 0.0 ? count : 0;
  if (beats(0.0f, first, sums.max_key, sums.max_index)) {
    sums.max_key = 0;
    sums.max_index = first;
    sums.max_abs = 0;
  }
  exponent_counts_[0][0] += count;
  float_pass_pairs_ += count;
  return 0;
}

template <class R, class D>
void MetricAccumulator::add_exact(const R* r, const D* d, uint64_t count, uint64_t first,
                                  Sums& sums) {
  const double atol = options_.atol;
  const double rtol = options_.rtol;
  for (uint64_t j = 0; j < count; ++j) {
    const double a = static_cast<double>(r[j]);
    const double b = static_cast<double>(d[j]);
    const bool a_counts = std::fabs(a) <= kFloatMax;  // false for NaN, Inf and beyond float
    const bool b_counts = std::fabs(b) <= kFloatMax;
    if (!a_counts || !b_counts) {
      ref_nan_ += std::isnan(a) ? 1 : 0;
      ref_inf_ += !a_counts && !std::isnan(a) ? 1 : 0;
      dev_nan_ += std::isnan(b) ? 1 : 0;
      dev_inf_ += !b_counts && !std::isnan(b) ? 1 : 0;
      continue;
    }
    const double e = b - a;
    const double abs_e = std::fabs(e);
    sums.r2 += a * a;
    sums.d2 += b * b;
    sums.e2 += e * e;
    sums.abs_e += abs_e;
    sums.rd += a * b;
    ++sums.n;
    sums.close += abs_e <= atol + rtol * std::fabs(a) ? 1 : 0;
    const float key = std::fabs(float_error(r[j], d[j]));  // |e| as the float pass has it
    ++exponent_counts_[0][bits_of(key) >> 23];
    if (beats(key, first + j, sums.max_key, sums.max_index)) {
      sums.max_key = key;
      sums.max_index = first + j;
      sums.max_abs = abs_e;
    }
  }
}

void MetricAccumulator::flush_pair_counts() {
  fold_pairs(pair_counts_, exponent_counts_[0]);
  std::fill(pair_counts_.begin(), pair_counts_.end(), 0u);
  pair_counts_total_ = 0;
}

std::array<uint64_t, 256> MetricAccumulator::exponent_histogram() const {
  std::array<uint64_t, 256> histogram{};
  for (const auto& copy : exponent_counts_) {
    for (size_t e = 0; e < 256; ++e) histogram[e] += copy[e];
  }
  fold_pairs(pair_counts_, histogram);
  return histogram;
}

void MetricAccumulator::add_saturation(uint64_t saturated_raw_values) {
  saturated_ += saturated_raw_values;
}

void MetricAccumulator::merge(const MetricAccumulator& other) {
  assert(other.map_.count == map_.count && other.map_.inner == map_.inner &&
         "merging accumulators of different channel maps");
  const size_t channels = std::min(sums_.size(), other.sums_.size());
  for (size_t c = 0; c < channels; ++c) sums_[c].merge(other.sums_[c]);
  const size_t columns = std::min(columns_.n.size(), other.columns_.n.size());
  for (size_t c = 0; c < columns; ++c) {
    columns_.r2[c] += other.columns_.r2[c];
    columns_.e2[c] += other.columns_.e2[c];
    columns_.abs_e[c] += other.columns_.abs_e[c];
    columns_.max_abs[c] = std::max(columns_.max_abs[c], other.columns_.max_abs[c]);
    columns_.n[c] += other.columns_.n[c];
  }
  elements_ += other.elements_;
  ref_nan_ += other.ref_nan_;
  ref_inf_ += other.ref_inf_;
  dev_nan_ += other.dev_nan_;
  dev_inf_ += other.dev_inf_;
  saturated_ += other.saturated_;
  masked_ += other.masked_;
  const std::array<uint64_t, 256> histogram = other.exponent_histogram();
  for (size_t e = 0; e < 256; ++e) exponent_counts_[0][e] += histogram[e];
}

Metrics MetricAccumulator::finish(const Quantization* device_quant) const {
  Metrics m;
  Sums total;
  for (const Sums& s : sums_) total.merge(s);

  m.elements = elements_;
  m.n = total.n;
  m.ref_nan = ref_nan_ - masked_;
  m.ref_inf = ref_inf_;
  m.dev_nan = dev_nan_ - masked_;
  m.dev_inf = dev_inf_;
  m.masked = masked_;
  const Figures f = figures_of(total);
  m.sqnr_db = f.sqnr_db;
  m.mse = f.mse;
  m.rmse = f.rmse;
  m.mae = f.mae;
  m.l1_sum = total.abs_e;
  m.max_abs = total.n ? total.max_abs : 0;
  m.max_abs_index = total.n ? total.max_index : 0;
  m.rel_l2 = f.rel_l2;
  m.cosine = f.cosine;
  m.allclose_frac = f.allclose_frac;

  // Histogram: the 31 octaves ending with the highest non-empty one, everything below in bin 0.
  const std::array<uint64_t, 256> exponents = exponent_histogram();
  int top = 127;  // no nonzero error: the top bin is [1, 2)
  for (int e = 255; e >= 1; --e) {
    if (exponents[static_cast<size_t>(e)] != 0) {
      top = e;
      break;
    }
  }
  constexpr int kBins = static_cast<int>(kHistogramBins);
  top = std::max(top, kBins - 1);  // bin 1 starts at 2^-126 or above: zeros and subnormals in bin 0
  const int bin1 = top - kBins + 2;  // the exponent field of bin 1
  m.error_histogram.assign(kHistogramBins, 0);
  m.histogram_edges.assign(kHistogramBins + 1, 0);
  for (int e = 0; e <= top; ++e) {  // buckets above `top` are empty
    m.error_histogram[static_cast<size_t>(std::max(e - bin1 + 1, 0))] +=
        exponents[static_cast<size_t>(e)];
  }
  for (int i = 1; i <= kBins; ++i) {
    m.histogram_edges[static_cast<size_t>(i)] = std::ldexp(1.0, bin1 + i - 1 - 127);
  }

  add_channels(m);
  if (device_quant != nullptr && device_quant->is_quantized()) add_quantized(m, *device_quant);
  return m;
}

MetricAccumulator::ChannelColumns MetricAccumulator::channel_columns() const {
  if (by_rows()) return columns_;
  ChannelColumns columns;
  for (const Sums& s : sums_) {
    columns.r2.push_back(s.r2);
    columns.e2.push_back(s.e2);
    columns.abs_e.push_back(s.abs_e);
    columns.max_abs.push_back(s.n ? s.max_abs : 0);
    columns.n.push_back(s.n);
  }
  return columns;
}

namespace {

// The cell of head h at position p (ChannelMap::heads).
uint64_t kv_cell(const ChannelMap& map, uint64_t head, uint64_t position) {
  const uint64_t positions = map.count / map.heads;
  return map.heads_inner ? position * map.heads + head : head * positions + position;
}

// Each head's positions whose cell differs, as ranges.
KvCells differing_cells(const ChannelMap& map, const MetricAccumulator::ChannelColumns& cells) {
  KvCells out{map.heads, map.count / map.heads, {}};
  for (uint64_t h = 0; h < out.heads; ++h) {
    const auto differs = [&](uint64_t p) {
      const uint64_t c = kv_cell(map, h, p);
      return cells.n[c] > 0 && sqnr_of(cells.r2[c], cells.e2[c]) < kHealthyChannelDb;
    };
    for (const auto& [first, last] : ranges_where(out.positions, differs)) {
      out.differing.push_back({h, first, last});
    }
  }
  return out;
}

// The positions' sums: each the sum of its heads' cells.
MetricAccumulator::ChannelColumns positions_of(const ChannelMap& map,
                                               const MetricAccumulator::ChannelColumns& cells) {
  const uint64_t positions = map.count / map.heads;
  MetricAccumulator::ChannelColumns out;
  for (auto* column : {&out.r2, &out.e2, &out.abs_e, &out.max_abs}) column->assign(positions, 0);
  out.n.assign(positions, 0);
  for (uint64_t h = 0; h < map.heads; ++h) {
    for (uint64_t p = 0; p < positions; ++p) {
      const uint64_t c = kv_cell(map, h, p);
      out.r2[p] += cells.r2[c];
      out.e2[p] += cells.e2[c];
      out.abs_e[p] += cells.abs_e[c];
      out.max_abs[p] = std::max(out.max_abs[p], cells.max_abs[c]);
      out.n[p] += cells.n[c];
    }
  }
  return out;
}

}  // namespace

void MetricAccumulator::add_channels(Metrics& m) const {
  if (map_.count < 2) return;
  ChannelColumns columns = channel_columns();
  if (map_.heads > 1) {
    m.kv_cells = differing_cells(map_, columns);
    columns = positions_of(map_, columns);
  }
  const uint64_t count = columns.n.size();
  m.channels.reserve(count);
  for (uint64_t c = 0; c < count; ++c) {
    const uint64_t n = columns.n[c];
    m.channels.push_back({sqnr_of(columns.r2[c], columns.e2[c]),
                          n ? columns.abs_e[c] / static_cast<double>(n) : 0,
                          columns.max_abs[c],
                          n,
                          {},
                          {}});
  }
  std::vector<uint64_t> order(count);
  std::iota(order.begin(), order.end(), uint64_t{0});
  const size_t named = std::min<size_t>(kWorstChannels, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(named), order.end(),
                    [&](uint64_t a, uint64_t b) {
                      const double sa = m.channels[a].sqnr_db, sb = m.channels[b].sqnr_db;
                      return sa < sb || (sa == sb && a < b);
                    });
  m.worst_channels.assign(order.begin(), order.begin() + static_cast<ptrdiff_t>(named));
  m.worst_channel = m.worst_channels.front();
  m.channel_summary = summarize_channels(m);
}

void MetricAccumulator::add_quantized(Metrics& m, const Quantization& quant) const {
  m.saturation = elements_ ? static_cast<double>(saturated_) / static_cast<double>(elements_) : 0;
  const std::vector<double>& scales = quant.scales;
  const bool per_tensor = scales.size() == 1;
  if (per_tensor) {
    m.lsb_mae = m.mae / scales[0];
    m.lsb_max = m.max_abs / scales[0];
    m.noise_ratio = m.rmse / (scales[0] / std::sqrt(12.0));
    for (ChannelMetrics& channel : m.channels) {
      channel.lsb_mae = channel.mae / scales[0];
      channel.lsb_max = channel.max_abs / scales[0];
    }
    return;
  }
  if (scales.size() != map_.count) return;  // cannot tell each pair's scale
  const ChannelColumns columns = channel_columns();
  double lsb_abs_sum = 0;  // sum over pairs of |e| / scale
  double lsb_max = 0;      // max over channels of max_abs / scale
  double scale_power = 0;  // sum over pairs of scale^2
  double e2 = 0;
  uint64_t n = 0;
  for (uint64_t c = 0; c < map_.count; ++c) {
    const double scale = scales[c];
    lsb_abs_sum += columns.abs_e[c] / scale;
    lsb_max = std::max(lsb_max, columns.max_abs[c] / scale);
    scale_power += static_cast<double>(columns.n[c]) * scale * scale;
    e2 += columns.e2[c];
    n += columns.n[c];
    m.channels[c].lsb_mae = m.channels[c].mae / scale;
    m.channels[c].lsb_max = columns.max_abs[c] / scale;
  }
  m.lsb_mae = n ? lsb_abs_sum / static_cast<double>(n) : 0;
  m.lsb_max = lsb_max;
  // rmse over (the RMS of the scales, weighted by each channel's pairs) / sqrt 12.
  m.noise_ratio = n ? std::sqrt(12.0 * e2 / scale_power) : 0;
}

std::optional<double> reference_rms_lsb(const Metrics& m) {
  if (!m.noise_ratio || !(m.rmse > 0) || m.n == 0) return std::nullopt;
  const double rms = *m.noise_ratio * std::pow(10.0, m.sqnr_db / 20) / std::sqrt(12.0);
  return std::isfinite(rms) ? std::optional<double>(rms) : std::nullopt;
}

std::optional<ChannelSummary> summarize_channels(const Metrics& m) {
  if (!m.worst_channel || *m.worst_channel >= m.channels.size()) return std::nullopt;
  std::vector<double> sqnr;
  sqnr.reserve(m.channels.size());
  for (const ChannelMetrics& c : m.channels) sqnr.push_back(c.sqnr_db);
  const auto middle = sqnr.begin() + static_cast<ptrdiff_t>((sqnr.size() - 1) / 2);
  std::nth_element(sqnr.begin(), middle, sqnr.end());
  return ChannelSummary{m.channels.size(), m.channels[*m.worst_channel].sqnr_db, *middle};
}

double median_channel_sqnr_db(const Metrics& m) {
  return m.channel_summary ? m.channel_summary->median_sqnr_db
                           : std::numeric_limits<double>::quiet_NaN();
}

std::optional<uint64_t> standout_channel(const Metrics& m) {
  if (!m.worst_channel || !m.channel_summary) return std::nullopt;
  const double worst = m.channel_summary->worst_sqnr_db;
  // Two channels at +inf (exact) against one at 30 dB: it stands out. Compared after clamping so
  // that inf - inf never decides.
  const double median = std::min(median_channel_sqnr_db(m), kExactSqnrDb);
  if (median >= kHealthyChannelDb && std::min(worst, kExactSqnrDb) <= median - kStandoutChannelDb) {
    return m.worst_channel;
  }
  return std::nullopt;
}

template void MetricAccumulator::add(const float*, const float*, uint64_t, uint64_t, double*);
template void MetricAccumulator::add(const float*, const double*, uint64_t, uint64_t, double*);
template void MetricAccumulator::add(const float*, const Split*, uint64_t, uint64_t, double*);
template void MetricAccumulator::add(const double*, const float*, uint64_t, uint64_t, double*);
template void MetricAccumulator::add(const double*, const double*, uint64_t, uint64_t, double*);
template void MetricAccumulator::add(const Split*, const float*, uint64_t, uint64_t, double*);
template void MetricAccumulator::add(const Split*, const Split*, uint64_t, uint64_t, double*);

}  // namespace qd::compare
