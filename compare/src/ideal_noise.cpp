#include "ideal_noise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_dispatch.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/metrics.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace qd::compare {
namespace {

inline double value_of(float v) { return v; }
inline double value_of(double v) { return v; }
inline double value_of(const Split& v) { return static_cast<double>(v); }

// Every figure below is a sum of a piece's pairs in element order, from zero (docs/metrics.md,
// "Determinism"): the same terms in the same order on every path, so the same bits.

template <int kTag, class R, class D>
[[gnu::always_inline]] inline void add_body(const R* r, const D* d, uint64_t count, uint64_t first,
                                            const IdealGrid* grids, ChannelMap channels,
                                            double& signal, double& noise, uint64_t& n) {
  for (uint64_t i = 0; i < count; ++i) {
    const double rv = value_of(r[i]);
    if (!std::isfinite(rv) || !std::isfinite(value_of(d[i]))) continue;
    const size_t c = channels.count > 1 ? ((first + i) / channels.inner) % channels.count : 0;
    const IdealGrid& g = grids[c];
    const double q = std::clamp(std::nearbyint(rv / g.scale) - g.offset, g.raw_min, g.raw_max);
    const double e = (q + g.offset) * g.scale - rv;
    signal += rv * rv;
    noise += e * e;
    ++n;
  }
}

// Compiled twice, so that the AVX2 build inlines the rounding (the baseline calls libm's
// nearbyint); the tag only makes the two instantiations distinct.
template <class R, class D>
void add_baseline(const R* r, const D* d, uint64_t count, uint64_t first, const IdealGrid* grids,
                  ChannelMap channels, double& signal, double& noise, uint64_t& n) {
  add_body<0>(r, d, count, first, grids, channels, signal, noise, n);
}

#if defined(__x86_64__)
template <class R, class D>
__attribute__((target("avx2"))) void add_avx2(const R* r, const D* d, uint64_t count,
                                              uint64_t first, const IdealGrid* grids,
                                              ChannelMap channels, double& signal, double& noise,
                                              uint64_t& n) {
  add_body<1>(r, d, count, first, grids, channels, signal, noise, n);
}

// ---- Eight pieces side by side (AVX2) -------------------------------------------------------
//
// A piece's sums are a chain of additions, each waiting for the one before: one piece alone runs
// at the adder's latency. Eight pieces of one chunk are eight chains, one per double lane (two
// vectors), stepped together: lane k takes element i of piece k at step i, so each chain still
// adds its own pairs in order, from zero. The grid's rounding uses a reciprocal, proved equal to
// the division's (see close_to_half); a lane that cannot be proved sends the pieces to add_body.

// Half an integer less this: a quotient x whose reciprocal estimate x' is within it of an
// integer k rounds to k. |x' - x| <= |x| 2^-51.9 (two roundings), under 2^-31 for |x| < 2^20, and
// rounding x to a double moves it by at most 2^-33, so neither can reach k +- 1/2.
constexpr double kHalfMargin = 0.5 - 0x1p-29;
// The largest |x'| the margin covers (the caller checks the chunk's range against it).
constexpr double kMaxQuotient = 0x1p19;

struct IdealVectorGrid {
  __m256d inv, scale, offset, raw_min, raw_max;
};

struct IdealLaneSums {  // set by eight_chains (a member initializer would be compiled without AVX)
  __m256d signal, noise;
  __m256i n;
};

// One step of four chains: rv holds element i of four pieces. `bad` collects the lanes whose
// rounding was not proved.
template <bool kClamp, bool kNonFinite>
__attribute__((target("avx2"), always_inline)) inline void lane_step(__m256d rv,
                                                                     const IdealVectorGrid& g,
                                                                     IdealLaneSums& s,
                                                                     __m256d& bad) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d x = _mm256_mul_pd(rv, g.inv);
  const __m256d k = _mm256_round_pd(x, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC);
  bad = _mm256_or_pd(bad, _mm256_cmp_pd(_mm256_andnot_pd(sign, _mm256_sub_pd(x, k)),
                                        _mm256_set1_pd(kHalfMargin), _CMP_GE_OQ));
  __m256d t = k;  // (k - offset) + offset is k exactly when nothing is clamped
  if constexpr (kClamp) {
    const __m256d q = _mm256_sub_pd(k, g.offset);
    t = _mm256_add_pd(_mm256_min_pd(_mm256_max_pd(q, g.raw_min), g.raw_max), g.offset);
  }
  const __m256d e = _mm256_sub_pd(_mm256_mul_pd(t, g.scale), rv);
  __m256d r2 = _mm256_mul_pd(rv, rv), e2 = _mm256_mul_pd(e, e);
  if constexpr (kNonFinite) {  // a skipped pair adds +0, which leaves a sum of squares as it is
    const __m256d finite = _mm256_cmp_pd(
        _mm256_andnot_pd(sign, rv), _mm256_set1_pd(std::numeric_limits<float>::max()), _CMP_LE_OQ);
    r2 = _mm256_and_pd(r2, finite);
    e2 = _mm256_and_pd(e2, finite);
    s.n = _mm256_sub_epi64(s.n, _mm256_castpd_si256(finite));
  }
  s.signal = _mm256_add_pd(s.signal, r2);
  s.noise = _mm256_add_pd(s.noise, e2);
}

// Eight vectors of eight values each, rows[k][c .. c + 8) in vector k, as eight vectors of one
// column each (element c + j of every row in vector j).
__attribute__((target("avx2"), always_inline)) inline void transpose8(__m256 (&a)[8],
                                                                      __m256 (&out)[8]) {
  __m256 b[8];
  for (int k = 0; k < 8; k += 2) {
    b[k] = _mm256_unpacklo_ps(a[k], a[k + 1]);
    b[k + 1] = _mm256_unpackhi_ps(a[k], a[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    a[k] = _mm256_shuffle_ps(b[k], b[k + 2], 0x44);
    a[k + 1] = _mm256_shuffle_ps(b[k], b[k + 2], 0xEE);
    a[k + 2] = _mm256_shuffle_ps(b[k + 1], b[k + 3], 0x44);
    a[k + 3] = _mm256_shuffle_ps(b[k + 1], b[k + 3], 0xEE);
  }
  // a[0..3]: columns 0, 1, 2, 3 (and 4..7 in the upper halves) of rows 0-3; a[4..7] of rows 4-7.
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2f128_ps(a[j], a[j + 4], 0x20);
    out[j + 4] = _mm256_permute2f128_ps(a[j], a[j + 4], 0x31);
  }
}

// The first `columns` (a multiple of 8) elements of eight rows, each row's chain in its lane.
// False when some lane's rounding could not be proved: nothing is to be kept then.
template <bool kClamp, bool kNonFinite>
__attribute__((target("avx2"))) bool eight_chains(const float* const* rows, uint64_t columns,
                                                  const IdealGrid& grid, double inv,
                                                  bool skip_zeros, double* signal, double* noise,
                                                  uint64_t* n) {
  const IdealVectorGrid g{_mm256_set1_pd(inv), _mm256_set1_pd(grid.scale),
                          _mm256_set1_pd(grid.offset), _mm256_set1_pd(grid.raw_min),
                          _mm256_set1_pd(grid.raw_max)};
  const __m256d zero = _mm256_setzero_pd();
  IdealLaneSums low{zero, zero, _mm256_setzero_si256()}, high = low;  // rows 0-3, rows 4-7
  __m256d bad = _mm256_setzero_pd();
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  uint64_t skipped = 0;  // elements of each row left out as zeros (finite pairs all)
  for (uint64_t c = 0; c < columns; c += 8) {
    __m256 loaded[8], column[8];
    __m256i any = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      loaded[k] = _mm256_loadu_ps(rows[k] + c);
      any = _mm256_or_si256(any, _mm256_castps_si256(loaded[k]));
    }
    // Zeros (a KV cache's unwritten slots) add +0 to both sums when 0 is on the grid: the chains
    // stay as they are.
    if (skip_zeros && _mm256_testz_si256(any, magnitude)) {
      skipped += 8;
      continue;
    }
    transpose8(loaded, column);
    for (const __m256 v : column) {
      lane_step<kClamp, kNonFinite>(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), g, low, bad);
      lane_step<kClamp, kNonFinite>(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), g, high, bad);
    }
  }
  if (_mm256_movemask_pd(bad) != 0) return false;
  _mm256_storeu_pd(signal, low.signal);
  _mm256_storeu_pd(signal + 4, high.signal);
  _mm256_storeu_pd(noise, low.noise);
  _mm256_storeu_pd(noise + 4, high.noise);
  uint64_t counted[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(counted), low.n);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(counted + 4), high.n);
  for (int k = 0; k < 8; ++k) n[k] = kNonFinite ? counted[k] + skipped : columns;
  return true;
}
#endif

// What eight_chains needs to know of a chunk before it starts.
struct IdealChunkScan {
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  bool non_finite = false;
  bool lowest = false;  // float32's lowest value: maybe a masked pair, which add() would skip
};

template <int kTag>
[[gnu::always_inline]] inline IdealChunkScan scan_body(const float* r, uint64_t count) {
  uint32_t any_non_finite = 0, any_lowest = 0;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
#pragma omp simd reduction(min : lo) reduction(max : hi) reduction(| : any_non_finite, any_lowest)
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, r + i, sizeof(bits));
    any_non_finite |= (bits & 0x7F800000u) == 0x7F800000u ? 1u : 0u;
    any_lowest |= bits == 0xFF7FFFFFu ? 1u : 0u;
    lo = r[i] < lo ? r[i] : lo;  // NaN compares false: left out
    hi = r[i] > hi ? r[i] : hi;
  }
  return {lo, hi, any_non_finite != 0, any_lowest != 0};
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) IdealChunkScan scan_chunk(const float* r, uint64_t count) {
  return scan_body<1>(r, count);
}
#endif

#if defined(__x86_64__)
// The pieces of a chunk, at most this many (the comparator's chunks have eight).
constexpr uint64_t kMaxPieces = 64;

// The elements up to the last nonzero one (rounded up to whole eights): when zero is on the grid,
// a zero adds +0 to both sums and leaves a chain as it is, so the chain may stop there.
__attribute__((target("avx2"))) uint64_t valued_length(const float* p, uint64_t length) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  uint64_t end = length;
  for (; end % 8 != 0; --end) {
    uint32_t bits;
    std::memcpy(&bits, p + end - 1, sizeof(bits));
    if ((bits & 0x7FFFFFFFu) != 0) return length;
  }
  for (; end > 0; end -= 8) {
    const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(p + end - 8));
    if (!_mm256_testz_si256(v, magnitude)) break;
  }
  return end;
}

// A piece with values, for its chain: `length` values readable, zeros after the first `used`
// (which add nothing to a chain when zero is on the grid), and what its chunk's scan found.
struct ChainRow {
  const float* values;
  uint64_t used, length;
  bool clamp, non_finite;
};

// Appends copies of the rows to the held pieces (their chunk is about to go).
void hold(const ChainRow* rows, size_t count, std::vector<float>& values,
          std::vector<HeldPiece>& held) {
  for (size_t k = 0; k < count; ++k) {
    held.push_back(
        {values.size(), rows[k].used, rows[k].length, rows[k].clamp, rows[k].non_finite});
    values.insert(values.end(), rows[k].values, rows[k].values + rows[k].length);
  }
}

// Row elements [from, to) added to its chain (d = r: as finite as the device's).
void continue_chain(const ChainRow& row, uint64_t from, uint64_t to, const IdealGrid& g,
                    double& signal, double& noise, uint64_t& n) {
  if (to > from)
    add_avx2(row.values + from, row.values + from, to - from, 0, &g, {}, signal, noise, n);
}

// Eight rows' chains side by side, up to where the shortest row ends, then each row's last values
// on its own chain; a lane whose rounding cannot be proved sends all eight to their own chains.
// Each row's sums are added in row order, as add() per piece would.
void chain_eight(const ChainRow* rows, const IdealGrid& g, double inv, bool zeros_add_nothing,
                 double& signal_total, double& noise_total, uint64_t& n_total) {
  const float* values[8];
  uint64_t columns = rows[0].length;
  bool clamp = false, non_finite = false;  // either variant gives a row without them its bits
  for (int k = 0; k < 8; ++k) {
    values[k] = rows[k].values;
    columns = std::min(columns, rows[k].length & ~uint64_t{7});
    clamp = clamp || rows[k].clamp;
    non_finite = non_finite || rows[k].non_finite;
  }
  const auto chains = clamp ? (non_finite ? eight_chains<true, true> : eight_chains<true, false>)
                            : (non_finite ? eight_chains<false, true> : eight_chains<false, false>);
  double signal[8], noise[8];
  uint64_t n[8];
  const bool proved = chains(values, columns, g, inv, zeros_add_nothing, signal, noise, n);
  for (int k = 0; k < 8; ++k) {
    const ChainRow& row = rows[k];
    const uint64_t from = proved ? columns : 0, to = std::max(row.used, from);
    double row_signal = proved ? signal[k] : 0, row_noise = proved ? noise[k] : 0;
    uint64_t row_n = (proved ? n[k] : 0) + (row.length - to);  // the zeros after `to` are finite
    continue_chain(row, from, to, g, row_signal, row_noise, row_n);
    signal_total += row_signal;
    noise_total += row_noise;
    n_total += row_n;
  }
}
#endif

}  // namespace

IdealNoise::IdealNoise(const TensorRecord& device, ChannelMap channels) : channels_(channels) {
  const Quantization& quant = device.quant;
  const auto raw = saturation_range(device);
  if (!quant.is_quantized() || !raw) return;
  if (quant.per_axis() && channels.count != quant.scales.size()) return;
  if (!quant.per_axis()) channels_ = {};
  const auto raw_min = static_cast<double>(raw->min);
  const auto raw_max = static_cast<double>(raw->max);
  double largest = 0;  // the largest |device value| the codes can decode to
  for (size_t c = 0; c < quant.scales.size(); ++c) {
    const double offset = static_cast<double>(quant.offsets[c]);
    if (!(quant.scales[c] > 0) || !std::isfinite(quant.scales[c])) {  // linted elsewhere
      grids_.clear();
      return;
    }
    const double add = quant.convention == QuantConvention::kQnnOffset ? offset : -offset;
    grids_.push_back({quant.scales[c], add, raw_min, raw_max});
    largest = std::max(
        largest, std::max(std::fabs(raw_min + add), std::fabs(raw_max + add)) * quant.scales[c]);
  }
  // Half the float range: whatever the decoder's rounding, every device value is finite.
  device_finite_ = largest <= double(std::numeric_limits<float>::max()) / 2;
}

template <class R, class D>
void IdealNoise::add(const R* r, const D* d, uint64_t count, uint64_t first) {
  if (!active()) return;
  flush();  // the pieces held come before these pairs
  double signal = 0, noise = 0;
  uint64_t n = 0;
#if defined(__x86_64__)
  if (kernels::active() == kernels::Isa::kAvx2) {
    add_avx2(r, d, count, first, grids_.data(), channels_, signal, noise, n);
  } else {
    add_baseline(r, d, count, first, grids_.data(), channels_, signal, noise, n);
  }
#else
  add_baseline(r, d, count, first, grids_.data(), channels_, signal, noise, n);
#endif
  signal_ += signal;
  noise_ += noise;
  n_ += n;
}

bool IdealNoise::add_pieces(const float* r, uint64_t count, uint64_t first, uint64_t piece) {
#if defined(__x86_64__)
  (void)first;  // a per-tensor grid: every element's is the same
  if (!active() || r == nullptr || grids_.size() != 1 || !device_finite_ || piece < 8 ||
      count < 2 * piece || count > kMaxPieces * piece || kernels::active() != kernels::Isa::kAvx2) {
    return false;
  }
  const IdealChunkScan s = scan_chunk(r, count);
  const IdealGrid& g = grids_[0];
  const double inv = 1.0 / g.scale;
  const double reach = std::max(std::fabs(double(s.min)), std::fabs(double(s.max))) * inv;
  // s.min = +inf: nothing finite. An offset beyond 2^52 would make (k - offset) + offset inexact.
  if (s.lowest || !(reach < kMaxQuotient) || !(std::fabs(g.offset) <= 0x1p52)) return false;
  const bool clamp = std::floor(double(s.min) * inv) - 1 - g.offset < g.raw_min ||
                     std::ceil(double(s.max) * inv) + 1 - g.offset > g.raw_max;
  // The pieces held from earlier chunks come first, then this chunk's, in piece order: each
  // eight of them share the chains, and the last few are held for the next chunk's.
  std::vector<ChainRow> rows;
  rows.reserve(held_.size() + (count + piece - 1) / piece);
  for (const HeldPiece& h : held_) {
    rows.push_back({held_values_.data() + h.at, h.used, h.length, h.clamp, h.non_finite});
  }
  const size_t earlier = rows.size();
  for (uint64_t at = 0; at < count; at += piece) {
    const uint64_t length = std::min(piece, count - at);
    const uint64_t used = zeros_add_nothing() ? valued_length(r + at, length) : length;
    if (used == 0) {
      n_ += length;  // zeros only: finite pairs that add nothing
      continue;
    }
    rows.push_back({r + at, used, length, clamp, s.non_finite});
  }
  const size_t grouped = rows.size() / 8 * 8;
  for (size_t k = 0; k < grouped; k += 8) {
    chain_eight(rows.data() + k, g, inv, zeros_add_nothing(), signal_, noise_, n_);
  }
  // The rows left are the held ones and this chunk's when no eight were complete, else this
  // chunk's last few: only this chunk's are copied.
  if (grouped > 0) {
    held_.clear();
    held_values_.clear();
  }
  const size_t fresh = std::max(grouped, earlier);
  hold(rows.data() + fresh, rows.size() - fresh, held_values_, held_);
  return true;
#else
  (void)r, (void)count, (void)first, (void)piece;
  return false;
#endif
}

bool IdealNoise::zeros_add_nothing() const {
  const IdealGrid& g = grids_[0];
  return -g.offset >= g.raw_min && -g.offset <= g.raw_max;
}

void IdealNoise::flush() {
  if (held_.empty()) return;
#if defined(__x86_64__)
  const IdealGrid& g = grids_[0];
  for (const HeldPiece& h : held_) {
    double signal = 0, noise = 0;
    uint64_t n = h.length - h.used;
    continue_chain({held_values_.data() + h.at, h.used, h.length, h.clamp, h.non_finite}, 0, h.used,
                   g, signal, noise, n);
    signal_ += signal;
    noise_ += noise;
    n_ += n;
  }
#endif
  held_.clear();
  held_values_.clear();
}

void IdealNoise::merge(const IdealNoise& other) {
  if (!other.held_.empty()) {
    IdealNoise flushed = other;
    flushed.flush();
    return merge(flushed);
  }
  flush();
  signal_ += other.signal_;
  noise_ += other.noise_;
  n_ += other.n_;
}

std::optional<double> IdealNoise::sqnr_db() const {
  if (!held_.empty()) {
    IdealNoise flushed = *this;
    flushed.flush();
    return flushed.sqnr_db();
  }
  if (!active() || n_ == 0) return std::nullopt;
  return sqnr_of(signal_, noise_);
}

template void IdealNoise::add(const float*, const float*, uint64_t, uint64_t);
template void IdealNoise::add(const Split*, const Split*, uint64_t, uint64_t);
template void IdealNoise::add(const float*, const Split*, uint64_t, uint64_t);
template void IdealNoise::add(const Split*, const float*, uint64_t, uint64_t);

}  // namespace qd::compare
