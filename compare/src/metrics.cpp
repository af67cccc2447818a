#include "qnn_debug/compare/metrics.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

namespace qd::compare {
namespace {

// Pairs per validity check; a block's float partials are folded into double every kSub pairs,
// so no float partial sum chains more than kSub / (vector lanes) additions (16 with SSE).
constexpr uint32_t kBlock = 256;
constexpr uint32_t kSub = 64;
// Runs of one channel shorter than this go straight to the double path.
constexpr uint64_t kMinFastRun = 16;

// A block sum of squares below this (but not zero) may hide squares that underflowed float:
// the block is redone in double. Above it, an underflowed square is < 2^-58 of the sum.
constexpr double kSmallestFloatSum = 0x1p-60;
// Relative and absolute margins of the float allclose test (docs/metrics.md, "allclose").
constexpr double kMargin = 0x1p-20;
constexpr float kTinyMargin = 0x1p-120f;

constexpr double kInf = std::numeric_limits<double>::infinity();

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// The element order used for the largest error: the larger float-rounded |e|, then the lower
// index.
inline bool beats(float key, uint64_t index, float best_key, uint64_t best_index) {
  return key > best_key || (key == best_key && index < best_index);
}

struct BlockSums {
  double r2 = 0, d2 = 0, e2 = 0, abs_e = 0, rd = 0;
  float max_e = 0;
  int32_t sure = 0;   // pairs certainly within tolerance
  int32_t maybe = 0;  // pairs possibly within tolerance
};

// Four-lane vectors (GCC/Clang vector extensions: SSE2 on generic x86-64, NEON on arm64). Written
// by hand rather than left to `omp simd` so every float partial chains exactly kSub / 4 additions
// and the lanes are folded into double without horizontal float sums.
using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using D2 = double __attribute__((vector_size(16)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline F4 abs4(F4 v) { return reinterpret_cast<F4>(reinterpret_cast<I4>(v) & 0x7FFFFFFF); }
inline D2 fold(F4 v) {  // lanes 0+2 and 1+3, in double
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), D2) +
         __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), D2);
}

// Float pass over `count` pairs (a multiple of 4, at most kBlock). Non-finite values and float
// overflow show up as non-finite sums, which the caller checks.
BlockSums float_block(const float* r, const float* d, uint32_t count, float atol_lo_s,
                      float rtol_lo_s, float atol_hi_s, float rtol_hi_s, uint32_t* exponents) {
  const F4 atol_lo = F4{} + atol_lo_s;
  const F4 rtol_lo = F4{} + rtol_lo_s;
  const F4 atol_hi = F4{} + atol_hi_s;
  const F4 rtol_hi = F4{} + rtol_hi_s;
  D2 r2d{}, d2d{}, e2d{}, abs_ed{}, rdd{};
  I4 sure{}, maybe{};
  F4 max_e{};
  for (uint32_t s = 0; s < count; s += kSub) {
    const uint32_t end = std::min(count, s + kSub);
    F4 r2{}, d2{}, e2{}, abs_e{}, rd{};
    for (uint32_t j = s; j < end; j += 4) {
      const F4 a = load4(r + j);
      const F4 b = load4(d + j);
      const F4 e = b - a;
      const F4 ae = abs4(e);
      const F4 aa = abs4(a);
      r2 += a * a;
      d2 += b * b;
      e2 += e * e;
      abs_e += ae;
      rd += a * b;
      max_e = ae > max_e ? ae : max_e;
      // A true comparison is -1. The lower threshold is clamped at 0: an exact zero error is
      // within any tolerance, even atol = 0 whose float threshold is slightly negative.
      const F4 low = atol_lo + rtol_lo * aa;
      sure -= ae <= (low > 0 ? low : F4{});
      maybe -= ae <= atol_hi + rtol_hi * aa;
      const I4 exponent = reinterpret_cast<I4>(ae) >> 23;
      std::memcpy(exponents + j, &exponent, sizeof(exponent));
    }
    r2d += fold(r2);
    d2d += fold(d2);
    e2d += fold(e2);
    abs_ed += fold(abs_e);
    rdd += fold(rd);
  }
  BlockSums block;
  block.r2 = r2d[0] + r2d[1];
  block.d2 = d2d[0] + d2d[1];
  block.e2 = e2d[0] + e2d[1];
  block.abs_e = abs_ed[0] + abs_ed[1];
  block.rd = rdd[0] + rdd[1];
  block.max_e = std::max(std::max(max_e[0], max_e[1]), std::max(max_e[2], max_e[3]));
  block.sure = sure[0] + sure[1] + sure[2] + sure[3];
  block.maybe = maybe[0] + maybe[1] + maybe[2] + maybe[3];
  return block;
}

// True when some value of x[0, count) is not +-0.
bool any_nonzero(const float* x, uint32_t count) {
  uint32_t bits = 0;
#pragma omp simd reduction(| : bits)
  for (uint32_t j = 0; j < count; ++j) bits |= bits_of(x[j]);
  return (bits & 0x7FFFFFFFu) != 0;
}

// True when the float sums of the block are as good as double ones: nothing overflowed or was
// non-finite, and no sum of squares is so small that squares may have underflowed (a sum below
// kSmallestFloatSum is trusted only when it is zero because every value is zero).
bool float_block_valid(const BlockSums& b, const float* r, const float* d, uint32_t count) {
  const bool finite = std::isfinite(b.r2) && std::isfinite(b.d2) && std::isfinite(b.e2) &&
                      std::isfinite(b.abs_e) && std::isfinite(b.rd);
  if (!finite) return false;
  if (b.e2 < kSmallestFloatSum && b.max_e > 0) return false;
  if (b.r2 < kSmallestFloatSum && (b.r2 > 0 || any_nonzero(r, count))) return false;
  if (b.d2 < kSmallestFloatSum && (b.d2 > 0 || any_nonzero(d, count))) return false;
  return true;
}

struct Figures {
  double sqnr_db, mse, rmse, mae, rel_l2, cosine, allclose_frac;
};

Figures figures_of(const MetricAccumulator::Sums& s) {
  Figures f{};
  const auto n = static_cast<double>(s.n);
  f.sqnr_db = s.e2 == 0 ? kInf : s.r2 == 0 ? -kInf : 10.0 * std::log10(s.r2 / s.e2);
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

MetricAccumulator::MetricAccumulator(MetricOptions options, uint64_t channels)
    : options_(options), sums_(std::max<uint64_t>(channels, 1)) {
  const double atol = options.atol;
  const double rtol = options.rtol;
  // The float test is used only where its margins are proven (docs/metrics.md).
  tolerance_.fast = std::isfinite(atol) && std::isfinite(rtol) && atol >= 0 && rtol >= 0 &&
                    atol <= 1e30 && rtol <= 1e30;
  if (tolerance_.fast) {
    tolerance_.atol_lo = static_cast<float>(atol * (1 - kMargin)) - kTinyMargin;
    tolerance_.rtol_lo = static_cast<float>(rtol * (1 - kMargin));
    tolerance_.atol_hi = static_cast<float>(atol * (1 + kMargin)) + kTinyMargin;
    tolerance_.rtol_hi = static_cast<float>(rtol * (1 + kMargin));
  }
}

void MetricAccumulator::add(const float* r, const float* d, uint64_t count, uint64_t first,
                            const uint32_t* channel) {
  elements_ += count;
  if (channel == nullptr || sums_.size() == 1) {
    add_run(r, d, count, first, sums_[0]);
    return;
  }
  for (uint64_t i = 0; i < count;) {
    const uint32_t c = channel[i];
    uint64_t j = i + 1;
    while (j < count && channel[j] == c) ++j;
    assert(c < sums_.size() && "channel id out of range");
    add_run(r + i, d + i, j - i, first + i, sums_[std::min<uint64_t>(c, sums_.size() - 1)]);
    i = j;
  }
}

void MetricAccumulator::add_run(const float* r, const float* d, uint64_t count, uint64_t first,
                                Sums& sums) {
  const uint64_t vector_part = count < kMinFastRun ? 0 : count & ~uint64_t{3};
  for (uint64_t done = 0; done < vector_part; done += kBlock) {
    const auto m = static_cast<uint32_t>(std::min<uint64_t>(kBlock, vector_part - done));
    add_block(r + done, d + done, m, first + done, sums);
  }
  add_exact(r + vector_part, d + vector_part, count - vector_part, first + vector_part, sums);
}

void MetricAccumulator::add_block(const float* r, const float* d, uint32_t count, uint64_t first,
                                  Sums& sums) {
  uint32_t exponents[kBlock];
  const Tolerance& t = tolerance_;
  const BlockSums b =
      float_block(r, d, count, t.atol_lo, t.rtol_lo, t.atol_hi, t.rtol_hi, exponents);
  if (!float_block_valid(b, r, d, count)) return add_exact(r, d, count, first, sums);

  sums.r2 += b.r2;
  sums.d2 += b.d2;
  sums.e2 += b.e2;
  sums.abs_e += b.abs_e;
  sums.rd += b.rd;
  sums.n += count;
  if (t.fast && b.sure == b.maybe) {
    sums.close += static_cast<uint64_t>(b.sure);
  } else {  // a pair within the margins of the float test: decide the block in double
    const double atol = options_.atol;
    const double rtol = options_.rtol;
    uint64_t close = 0;
    for (uint32_t j = 0; j < count; ++j) {
      const double a = r[j];
      close += std::fabs(static_cast<double>(d[j]) - a) <= atol + rtol * std::fabs(a) ? 1 : 0;
    }
    sums.close += close;
  }
  // The first pair of the block with the block's largest float |e|, if it beats the current one.
  if (beats(b.max_e, first, sums.max_key, sums.max_index)) {
    for (uint32_t j = 0; j < count; ++j) {
      if (std::fabs(d[j] - r[j]) != b.max_e) continue;
      if (beats(b.max_e, first + j, sums.max_key, sums.max_index)) {
        sums.max_key = b.max_e;
        sums.max_index = first + j;
        sums.max_abs = std::fabs(static_cast<double>(d[j]) - static_cast<double>(r[j]));
      }
      break;
    }
  }
  uint32_t j = 0;
  for (; j + 4 <= count; j += 4) {
    ++exponent_counts_[0][exponents[j]];
    ++exponent_counts_[1][exponents[j + 1]];
    ++exponent_counts_[2][exponents[j + 2]];
    ++exponent_counts_[3][exponents[j + 3]];
  }
  for (; j < count; ++j) ++exponent_counts_[0][exponents[j]];
}

void MetricAccumulator::add_exact(const float* r, const float* d, uint64_t count, uint64_t first,
                                  Sums& sums) {
  const double atol = options_.atol;
  const double rtol = options_.rtol;
  for (uint64_t j = 0; j < count; ++j) {
    const float a = r[j];
    const float b = d[j];
    const bool a_finite = std::isfinite(a);
    const bool b_finite = std::isfinite(b);
    if (!a_finite || !b_finite) {
      ref_nan_ += std::isnan(a) ? 1 : 0;
      ref_inf_ += std::isinf(a) ? 1 : 0;
      dev_nan_ += std::isnan(b) ? 1 : 0;
      dev_inf_ += std::isinf(b) ? 1 : 0;
      continue;
    }
    const double ra = a;
    const double db = b;
    const double e = db - ra;
    const double abs_e = std::fabs(e);
    sums.r2 += ra * ra;
    sums.d2 += db * db;
    sums.e2 += e * e;
    sums.abs_e += abs_e;
    sums.rd += ra * db;
    ++sums.n;
    sums.close += abs_e <= atol + rtol * std::fabs(ra) ? 1 : 0;
    const float key = std::fabs(b - a);  // float-rounded |e|, as in the float pass
    ++exponent_counts_[0][bits_of(key) >> 23];
    if (beats(key, first + j, sums.max_key, sums.max_index)) {
      sums.max_key = key;
      sums.max_index = first + j;
      sums.max_abs = abs_e;
    }
  }
}

void MetricAccumulator::add_saturation(uint64_t saturated_raw_values) {
  saturated_ += saturated_raw_values;
}

void MetricAccumulator::merge(const MetricAccumulator& other) {
  assert(other.sums_.size() == sums_.size() && "merging accumulators of different channel counts");
  const size_t channels = std::min(sums_.size(), other.sums_.size());
  for (size_t c = 0; c < channels; ++c) sums_[c].merge(other.sums_[c]);
  elements_ += other.elements_;
  ref_nan_ += other.ref_nan_;
  ref_inf_ += other.ref_inf_;
  dev_nan_ += other.dev_nan_;
  dev_inf_ += other.dev_inf_;
  saturated_ += other.saturated_;
  for (size_t k = 0; k < exponent_counts_.size(); ++k) {
    for (size_t e = 0; e < 256; ++e) exponent_counts_[k][e] += other.exponent_counts_[k][e];
  }
}

Metrics MetricAccumulator::finish(const Quantization* device_quant) const {
  Metrics m;
  Sums total;
  for (const Sums& s : sums_) total.merge(s);

  m.elements = elements_;
  m.n = total.n;
  m.ref_nan = ref_nan_;
  m.ref_inf = ref_inf_;
  m.dev_nan = dev_nan_;
  m.dev_inf = dev_inf_;
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
  std::array<uint64_t, 256> exponents{};
  for (const auto& copy : exponent_counts_) {
    for (size_t e = 0; e < 256; ++e) exponents[e] += copy[e];
  }
  int top = 127;  // no nonzero error: the octave [1, 2)
  for (int e = 255; e >= 1; --e) {
    if (exponents[static_cast<size_t>(e)] != 0) {
      top = e;
      break;
    }
  }
  top = std::max(top, static_cast<int>(kHistogramBins) - 1);  // bin 1 starts at 2^-126 or above
  const int lowest = top - static_cast<int>(kHistogramBins) + 2;  // exponent field of bin 1
  m.error_histogram.assign(kHistogramBins, 0);
  m.histogram_edges.assign(kHistogramBins + 1, 0);
  for (int e = 0; e < 256; ++e) {
    const int bin = std::max(e - lowest + 1, 0);
    m.error_histogram[static_cast<size_t>(bin)] += exponents[static_cast<size_t>(e)];
  }
  for (size_t i = 1; i <= kHistogramBins; ++i) {
    m.histogram_edges[i] = std::ldexp(1.0, lowest + static_cast<int>(i) - 1 - 127);
  }

  const uint64_t channels = sums_.size();
  if (channels > 1) {
    m.channels.reserve(channels);
    for (uint64_t c = 0; c < channels; ++c) {
      const Sums& s = sums_[c];
      const Figures cf = figures_of(s);
      m.channels.push_back({cf.sqnr_db, cf.mae, s.n ? s.max_abs : 0, s.n, {}, {}});
      if (!m.worst_channel || cf.sqnr_db < m.channels[*m.worst_channel].sqnr_db) {
        m.worst_channel = c;
      }
    }
  }

  if (device_quant == nullptr || !device_quant->is_quantized()) return m;
  m.saturation = elements_ ? static_cast<double>(saturated_) / static_cast<double>(elements_) : 0;
  const std::vector<double>& scales = device_quant->scales;
  const bool per_tensor = scales.size() == 1;
  if (!per_tensor && scales.size() != channels) return m;  // cannot tell each pair's scale
  double lsb_abs_sum = 0;     // sum over pairs of |e| / scale
  double lsb_max = 0;         // max over channels of max_abs / scale
  double scale_power = 0;     // sum over pairs of scale^2
  for (uint64_t c = 0; c < channels; ++c) {
    const Sums& s = sums_[c];
    const double scale = scales[per_tensor ? 0 : c];
    lsb_abs_sum += s.abs_e / scale;
    const double channel_max = s.n ? s.max_abs / scale : 0;
    lsb_max = std::max(lsb_max, channel_max);
    scale_power += static_cast<double>(s.n) * scale * scale;
    if (channels > 1) {
      m.channels[c].lsb_mae = m.channels[c].mae / scale;
      m.channels[c].lsb_max = channel_max;
    }
  }
  if (per_tensor) {
    m.lsb_mae = m.mae / scales[0];
    m.lsb_max = m.max_abs / scales[0];
    m.noise_ratio = m.rmse / (scales[0] / std::sqrt(12.0));
  } else {
    m.lsb_mae = total.n ? lsb_abs_sum / static_cast<double>(total.n) : 0;
    m.lsb_max = lsb_max;
    // rmse over the RMS of the scales (weighted by each channel's pairs) / sqrt(12).
    m.noise_ratio = total.n ? std::sqrt(12.0 * total.e2 / scale_power) : 0;
  }
  return m;
}

}  // namespace qd::compare
