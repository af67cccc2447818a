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

namespace qd::compare {
namespace {

// Pairs per block: the unit of the validity check and of the fallback to the exact path.
constexpr uint32_t kBlock = 256;
// The block pass has eight lanes whatever the vector width: lane i takes the pairs j of the block
// with j mod 8 = i (docs/metrics.md, "Determinism"). Blocks hold a multiple of kLanes pairs; the
// last up to kLanes - 1 pairs of a run take the exact path.
constexpr uint32_t kLanes = 8;
// Runs of one channel shorter than this go straight to the exact path.
constexpr uint64_t kMinFastRun = 16;
// Values beyond the float range count as infinite (docs/metrics.md, "Decoding"): the reach of a
// float32 device or reference, and what keeps every square and sum far from double overflow.
constexpr double kFloatMax = std::numeric_limits<float>::max();
// A block whose sum of squares is at most this has no value beyond the float range (nor a NaN:
// the comparison is false). Otherwise it takes the exact path, which counts them.
constexpr double kFloatMaxSquared = kFloatMax * kFloatMax;
// The block pass switches its histogram to the pair table after this many pairs.
constexpr uint64_t kPairTableAfter = uint64_t{1} << 17;
// The pair table's 32-bit counts are folded into the 64-bit histogram before they could wrap.
constexpr uint64_t kPairTableFold = uint64_t{1} << 31;

constexpr double kInf = std::numeric_limits<double>::infinity();

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// The order of "largest error": the larger |e|, then the lower index.
inline bool beats(double key, uint64_t index, double best_key, uint64_t best_index) {
  return key > best_key || (key == best_key && index < best_index);
}

// The float-rounded |e| whose exponent field places a pair in the histogram.
inline float histogram_key(double abs_e) { return static_cast<float>(abs_e); }

struct BlockSums {
  double r2 = 0, d2 = 0, e2 = 0, abs_e = 0, rd = 0;
  double max_e = 0;
  uint32_t close = 0;  // pairs within atol + rtol |r|
};

// The block pass is written once for GCC/Clang vector extensions and instantiated for two widths:
// two-lane double vectors (SSE2 on generic x86-64, NEON on arm64), four per step of eight pairs,
// and on x86-64 four-lane AVX2 vectors, two per step. It is written by hand rather than left to
// `omp simd` so that every lane adds the same terms in the same order, and the lanes are folded in
// the same order, at both widths: the results are bit-identical.
using D2 = double __attribute__((vector_size(16)));
using L2 = int64_t __attribute__((vector_size(16)));
using F2 = float __attribute__((vector_size(8)));
using I2 = int32_t __attribute__((vector_size(8)));
using U1 = uint64_t __attribute__((vector_size(8)));
#if defined(__x86_64__)
using D4 = double __attribute__((vector_size(32)));
using L4 = int64_t __attribute__((vector_size(32)));
using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using U2 = uint64_t __attribute__((vector_size(16)));
#endif

// The vector types that go with double vector D: its lanes as int64 (masks), the float vector of
// as many lanes (the histogram keys), that as int32 and as uint64 pairs.
template <class D>
struct VectorTypes;
template <>
struct VectorTypes<D2> {
  using L = L2;
  using F = F2;
  using I = I2;
  using U = U1;
};
#if defined(__x86_64__)
template <>
struct VectorTypes<D4> {
  using L = L4;
  using F = F4;
  using I = I4;
  using U = U2;
};
#endif

// Everything below up to block_with is always inlined into the instantiations, so that the AVX2
// one is compiled for AVX2 throughout. No function takes or returns a 32-byte vector by value:
// that would be an AVX argument in code compiled without AVX (GCC's -Wpsabi).

// Per-lane partial sums of one vector's lanes over a block.
template <class D>
struct Partials {
  D r2{}, d2{}, e2{}, abs_e{}, rd{};
};

// Per-lane largest |e| and allclose count. Their order does not matter, so they are shared by the
// vectors of a step.
template <class D>
struct Extremes {
  using L = typename VectorTypes<D>::L;
  D max_e{};
  L close{};
};

struct Tolerances {
  double atol, rtol;
};

// W values at p as doubles: loaded, or loaded as floats and widened (exact).
template <class D, class In>
[[gnu::always_inline]] inline void load(const In* p, D& out) {
  if constexpr (std::is_same_v<In, double>) {
    std::memcpy(&out, p, sizeof(out));
  } else {
    typename VectorTypes<D>::F narrow;
    std::memcpy(&narrow, p, sizeof(narrow));
    out = __builtin_convertvector(narrow, D);
  }
}

// One vector of pairs: r[0, W), d[0, W) for a W-lane D. Writes W / 2 keys (see block_with).
template <class D, class R, class Dv>
[[gnu::always_inline]] inline void step(const R* r, const Dv* d, Tolerances tol, Partials<D>& p,
                                        Extremes<D>& x, uint64_t* keys) {
  using L = typename VectorTypes<D>::L;
  using F = typename VectorTypes<D>::F;
  using I = typename VectorTypes<D>::I;
  using U = typename VectorTypes<D>::U;
  constexpr int64_t kMagnitude = 0x7FFFFFFFFFFFFFFF;
  D a, b;
  load(r, a);
  load(d, b);
  const D e = b - a;
  const D ae = reinterpret_cast<D>(reinterpret_cast<L>(e) & kMagnitude);
  const D abs_a = reinterpret_cast<D>(reinterpret_cast<L>(a) & kMagnitude);
  p.r2 += a * a;
  p.d2 += b * b;
  p.e2 += e * e;
  p.abs_e += ae;
  p.rd += a * b;
  x.max_e = ae > x.max_e ? ae : x.max_e;
  x.close -= ae <= (D{} + tol.atol) + (D{} + tol.rtol) * abs_a;  // a true comparison is -1
  // Exponent fields e0, e1, ... of the float-rounded |e| (sign bit clear): as 64-bit lanes
  // e0 | e1 << 32, ...; x | x >> 24 puts e0 | e1 << 8 in the low 16 bits of each.
  const F rounded = __builtin_convertvector(ae, F);
  const U exponents = reinterpret_cast<U>(reinterpret_cast<I>(rounded) >> 23);
  const U pair_keys = exponents | (exponents >> 24);
  std::memcpy(keys, &pair_keys, sizeof(pair_keys));
}

// The eight lanes of a sum, in lane order.
template <class D, int kVectors>
[[gnu::always_inline]] inline double fold_lanes(const Partials<D> (&p)[kVectors],
                                                D Partials<D>::*sum) {
  double lanes[kLanes];
  for (int v = 0; v < kVectors; ++v) std::memcpy(lanes + v * (kLanes / kVectors), &(p[v].*sum),
                                                 sizeof(D));
  // Lane k + 4 onto lane k, then (0 + 2) + (1 + 3): the same order at every width.
  double half[4];
  for (int k = 0; k < 4; ++k) half[k] = lanes[k] + lanes[k + 4];
  return (half[0] + half[2]) + (half[1] + half[3]);
}

// The block's sums over `count` pairs (a multiple of kLanes), and for each pair j < count the
// exponent of its float-rounded |e| in byte j % 2 of keys[j / 2] (the upper bits are junk, the
// same junk at every width).
template <class D, class R, class Dv>
[[gnu::always_inline]] inline BlockSums block_with(const R* r, const Dv* d, uint32_t count,
                                                   Tolerances tol, uint64_t* keys) {
  constexpr uint32_t kWidth = sizeof(D) / sizeof(double);
  constexpr int kVectors = kLanes / kWidth;  // per step of kLanes pairs
  Partials<D> partials[kVectors];
  Extremes<D> extremes;
  // Vector v holds lanes v W .. v W + W - 1 of each step: one pass over the block per vector keeps
  // only one vector's partials live (SSE2 has 16 registers).
#pragma GCC unroll 4  // kVectors: GCC leaves a loop over v with its partials in memory
  for (int v = 0; v < kVectors; ++v) {
    Partials<D> p;
    for (uint32_t j = static_cast<uint32_t>(v) * kWidth; j < count; j += kLanes) {
      step(r + j, d + j, tol, p, extremes, keys + j / 2);
    }
    partials[v] = p;
  }
  BlockSums block;
  block.r2 = fold_lanes<D, kVectors>(partials, &Partials<D>::r2);
  block.d2 = fold_lanes<D, kVectors>(partials, &Partials<D>::d2);
  block.e2 = fold_lanes<D, kVectors>(partials, &Partials<D>::e2);
  block.abs_e = fold_lanes<D, kVectors>(partials, &Partials<D>::abs_e);
  block.rd = fold_lanes<D, kVectors>(partials, &Partials<D>::rd);
  for (uint32_t k = 0; k < kWidth; ++k) {
    block.max_e = std::max(block.max_e, extremes.max_e[k]);
    block.close += static_cast<uint32_t>(extremes.close[k]);
  }
  return block;
}

// The block pass for each pair of input types (float or double per side: a float32 side is read
// as stored) at each width.
template <class R, class Dv>
using Block = BlockSums (*)(const R*, const Dv*, uint32_t, Tolerances, uint64_t*);

template <class R, class Dv>
BlockSums block_baseline(const R* r, const Dv* d, uint32_t count, Tolerances tol,
                         uint64_t* keys) {
  return block_with<D2>(r, d, count, tol, keys);
}

#if defined(__x86_64__)
// No "fma" in the target: -ffp-contract=off keeps products and sums apart anyway, and the
// baseline has no FMA to match.
template <class R, class Dv>
__attribute__((target("avx2"))) BlockSums block_avx2(const R* r, const Dv* d, uint32_t count,
                                                     Tolerances tol, uint64_t* keys) {
  return block_with<D4>(r, d, count, tol, keys);
}
#endif

template <class R, class Dv>
Block<R, Dv> block_for(kernels::Isa isa) {
#if defined(__x86_64__)
  if (isa == kernels::Isa::kAvx2) return block_avx2<R, Dv>;
#endif
  (void)isa;
  return block_baseline<R, Dv>;
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
// 10 log10(R / E), with the conventions of docs/metrics.md for zero sums.
double sqnr_of(double r2, double e2) {
  return e2 == 0 ? kInf : r2 == 0 ? -kInf : 10.0 * std::log10(r2 / e2);
}

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

void MetricAccumulator::Sums::merge(const Sums& other) {
  r2 += other.r2;
  d2 += other.d2;
  e2 += other.e2;
  abs_e += other.abs_e;
  rd += other.rd;
  n += other.n;
  close += other.close;
  if (other.n > 0 && beats(other.max_abs, other.max_index, max_abs, max_index)) {
    max_abs = other.max_abs;
    max_index = other.max_index;
  }
}

MetricAccumulator::MetricAccumulator(MetricOptions options, ChannelMap channels)
    : options_(options),
      map_{std::max<uint64_t>(channels.count, 1), std::max<uint64_t>(channels.inner, 1)} {
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
void MetricAccumulator::add(const R* r, const D* d, uint64_t count, uint64_t first) {
  elements_ += count;
  if (map_.count == 1 || by_rows()) {
    add_run(r, d, count, first, sums_[0]);
    if (by_rows()) add_rows(r, d, count, first);
    return;
  }
  for (uint64_t i = 0; i < count;) {
    const uint64_t element = first + i;
    const uint64_t run = std::min(map_.inner - element % map_.inner, count - i);
    add_run(r + i, d + i, run, element, sums_[(element / map_.inner) % map_.count]);
    i += run;
  }
}

namespace {

// Adds pairs r[k], d[k] of consecutive channels c0 + k to the columns (the channel axis last).
template <class R, class D>
void add_row_piece(const R* r, const D* d, uint64_t count, uint64_t c0,
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
void MetricAccumulator::add_run(const R* r, const D* d, uint64_t count, uint64_t first,
                                Sums& sums) {
  const uint64_t block_part = count < kMinFastRun ? 0 : count & ~uint64_t{kLanes - 1};
  for (uint64_t done = 0; done < block_part; done += kBlock) {
    const auto m = static_cast<uint32_t>(std::min<uint64_t>(kBlock, block_part - done));
    add_block(r + done, d + done, m, first + done, sums);
  }
  add_exact(r + block_part, d + block_part, count - block_part, first + block_part, sums);
}

template <class R, class D>
void MetricAccumulator::add_block(const R* r, const D* d, uint32_t count, uint64_t first,
                                  Sums& sums) {
  uint64_t keys[kBlock / 2];
  const Block<R, D> block = block_for<R, D>(kernels::active());
  const BlockSums b = block(r, d, count, {options_.atol, options_.rtol}, keys);
  if (!(b.r2 <= kFloatMaxSquared && b.d2 <= kFloatMaxSquared)) {
    return add_exact(r, d, count, first, sums);  // a NaN, an Inf or a value beyond float
  }
  sums.r2 += b.r2;
  sums.d2 += b.d2;
  sums.e2 += b.e2;
  sums.abs_e += b.abs_e;
  sums.rd += b.rd;
  sums.n += count;
  sums.close += b.close;
  // The first pair of the block with the block's largest |e|, if it beats the current one.
  if (beats(b.max_e, first, sums.max_abs, sums.max_index)) {
    for (uint32_t j = 0; j < count; ++j) {
      if (std::fabs(static_cast<double>(d[j]) - static_cast<double>(r[j])) != b.max_e) continue;
      if (beats(b.max_e, first + j, sums.max_abs, sums.max_index)) {
        sums.max_abs = b.max_e;
        sums.max_index = first + j;
      }
      break;
    }
  }

  const uint32_t key_count = count / 2;
  if (pair_counts_.empty() && block_pass_pairs_ >= kPairTableAfter) pair_counts_.assign(65536, 0);
  if (!pair_counts_.empty()) {
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
  block_pass_pairs_ += count;
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
    ++exponent_counts_[0][bits_of(histogram_key(abs_e)) >> 23];
    if (beats(abs_e, first + j, sums.max_abs, sums.max_index)) {
      sums.max_abs = abs_e;
      sums.max_index = first + j;
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
  const std::array<uint64_t, 256> histogram = other.exponent_histogram();
  for (size_t e = 0; e < 256; ++e) exponent_counts_[0][e] += histogram[e];
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

void MetricAccumulator::add_channels(Metrics& m) const {
  if (map_.count < 2) return;
  const ChannelColumns columns = channel_columns();
  m.channels.reserve(map_.count);
  for (uint64_t c = 0; c < map_.count; ++c) {
    const uint64_t n = columns.n[c];
    m.channels.push_back({sqnr_of(columns.r2[c], columns.e2[c]),
                          n ? columns.abs_e[c] / static_cast<double>(n) : 0, columns.max_abs[c], n,
                          {}, {}});
  }
  std::vector<uint64_t> order(map_.count);
  std::iota(order.begin(), order.end(), uint64_t{0});
  const size_t named = std::min<size_t>(kWorstChannels, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(named), order.end(),
                    [&](uint64_t a, uint64_t b) {
                      const double sa = m.channels[a].sqnr_db, sb = m.channels[b].sqnr_db;
                      return sa < sb || (sa == sb && a < b);
                    });
  m.worst_channels.assign(order.begin(), order.begin() + static_cast<ptrdiff_t>(named));
  m.worst_channel = m.worst_channels.front();
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

double median_channel_sqnr_db(const Metrics& m) {
  if (m.channels.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> sqnr;
  sqnr.reserve(m.channels.size());
  for (const ChannelMetrics& c : m.channels) sqnr.push_back(c.sqnr_db);
  const auto middle = sqnr.begin() + static_cast<ptrdiff_t>((sqnr.size() - 1) / 2);
  std::nth_element(sqnr.begin(), middle, sqnr.end());
  return *middle;
}

std::optional<uint64_t> standout_channel(const Metrics& m) {
  if (!m.worst_channel || *m.worst_channel >= m.channels.size()) return std::nullopt;
  const double worst = m.channels[*m.worst_channel].sqnr_db;
  // Two channels at +inf (exact) against one at 30 dB: it stands out. Compared after clamping so
  // that inf - inf never decides.
  const double median = std::min(median_channel_sqnr_db(m), kExactSqnrDb);
  if (median >= kHealthyChannelDb && std::min(worst, kExactSqnrDb) <= median - kStandoutChannelDb) {
    return m.worst_channel;
  }
  return std::nullopt;
}

template void MetricAccumulator::add(const float*, const float*, uint64_t, uint64_t);
template void MetricAccumulator::add(const float*, const double*, uint64_t, uint64_t);
template void MetricAccumulator::add(const double*, const float*, uint64_t, uint64_t);
template void MetricAccumulator::add(const double*, const double*, uint64_t, uint64_t);

}  // namespace qd::compare
