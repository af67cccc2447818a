#include "qnn_debug/compare/decode.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernel_dispatch.h"
#include "qnn_debug/base/elements.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace qd::compare {
namespace {

// Loops run over chunks this long so their saturation counters can be 32-bit lanes.
constexpr uint64_t kChunk = uint64_t{1} << 16;
// A per-axis encoding whose channel runs are at least this long is decoded run by run with the
// per-tensor kernels; shorter runs (channel axis last or nearly) go element by element.
constexpr uint64_t kMinRun = 16;

using elements::Nibble;
using elements::Plain;

// real = (q + add) * scale: QNN's offset as is, a zero point negated.
struct Affine {
  double add = 0;
  double scale = 1;
};

Affine affine_of(const Quantization& quant, uint64_t channel) {
  const double offset = static_cast<double>(quant.offsets[channel]);
  return {quant.convention == QuantConvention::kQnnOffset ? offset : -offset,
          quant.scales[channel]};
}

// The affine map in floats for a Split output: scale = s1 + s2 to about 2^-48 of it, and the
// offset, exact. Usable when every t = q + add of a 16-bit or narrower q is an exact float
// (|add| <= 2^23) and t * s1 - hi stays a normal float (|scale| within [2^-80, 2^100]).
struct SplitAffine {
  float add = 0;
  float s1 = 1;
  float s2 = 0;
};

std::optional<SplitAffine> split_affine(Affine a) {
  const double magnitude = std::fabs(a.scale);
  if (!(std::fabs(a.add) <= 0x1p23) || !(magnitude >= 0x1p-80 && magnitude <= 0x1p100)) {
    return std::nullopt;
  }
  const auto s1 = static_cast<float>(a.scale);
  return SplitAffine{static_cast<float>(a.add), s1, static_cast<float>(a.scale - double(s1))};
}

// One value: t = q + add exactly; hi = float(t * s1) (t * s1 is exact in double); lo = the exact
// remainder t * s1 - hi (a float) plus t * s2. The AVX2 kernel computes the same bits with FMA.
inline Split split_dequantize(int32_t q, SplitAffine a) {
  const float t = static_cast<float>(q) + a.add;
  const double product = double(t) * double(a.s1);
  const auto hi = static_cast<float>(product);
  const auto remainder = static_cast<float>(product - double(hi));
  return {hi, remainder + t * a.s2};
}

template <class R>
struct Bounds {
  typename R::Value lo;
  typename R::Value hi;
};

template <class R>
Bounds<R> bounds_of(const TensorRecord& t) {
  using Raw = typename R::Value;
  const SaturationRange range = *saturation_range(t);
  return {static_cast<Raw>(range.min), static_cast<Raw>(range.max)};
}

// Counts raw values at the ends of the range. Lane counters as wide as the raw values keep the
// loop at full vector width; they are flushed before they can wrap, whatever the vector width, and
// the run lengths are multiples of 16 so no scalar remainder runs between flushes.
template <class R>
void count_saturation(const uint8_t* bytes, uint64_t p0, uint64_t n, Bounds<R> bounds,
                      DecodeCounts& counts) {
  using Raw = typename R::Value;
  using Lane = std::conditional_t<sizeof(Raw) == 1, uint8_t,
                                  std::conditional_t<sizeof(Raw) == 2, uint16_t, uint32_t>>;
  constexpr uint64_t kRun = sizeof(Lane) == 1 ? 240 : sizeof(Lane) == 2 ? 65280 : kChunk;
  const Raw lo = bounds.lo;
  const Raw hi = bounds.hi;
  for (uint64_t done = 0; done < n; done += kRun) {
    const auto m = static_cast<uint32_t>(std::min(n - done, kRun));
    const uint64_t base = p0 + done;
    Lane below = 0;
    Lane above = 0;
#pragma omp simd reduction(+ : below, above)
    for (uint32_t j = 0; j < m; ++j) {
      const Raw q = R::at(bytes, base + j);
      below = static_cast<Lane>(below + (q <= lo ? 1 : 0));
      above = static_cast<Lane>(above + (q >= hi ? 1 : 0));
    }
    counts.at_min += below;
    counts.at_max += above;
  }
}

// 8-bit: a table of the 256 real values, computed in double once, then a lookup per element.
template <class R, class Out>
void dequantize_table(const uint8_t* bytes, uint64_t p0, uint64_t n, Affine a, Out* out) {
  Out table[256];
  for (int v = 0; v < 256; ++v) {
    const uint8_t pattern = static_cast<uint8_t>(v);  // the reader gives the value it stands for
    table[v] = static_cast<Out>((static_cast<double>(R::at(&pattern, 0)) + a.add) * a.scale);
  }
  const uint8_t* src = bytes + p0;
  uint64_t j = 0;
  for (; j + 4 <= n; j += 4) {  // one 32-bit load per four lookups
    uint32_t word;
    std::memcpy(&word, src + j, sizeof(word));
    out[j] = table[word & 0xFF];
    out[j + 1] = table[(word >> 8) & 0xFF];
    out[j + 2] = table[(word >> 16) & 0xFF];
    out[j + 3] = table[word >> 24];
  }
  for (; j < n; ++j) out[j] = table[src[j]];
}

#if defined(__x86_64__)
// 8- and 16-bit with AVX2, in one pass: the saturation counts on 32 bytes of raw values at a time,
// and the table's arithmetic, (double(q) + add) * scale (rounded to float for a float output), on
// four at a time in vector registers (the same values as the table or the scalar loop, without a
// load and a store per element).

// The sum of the unsigned lanes of v (bytes or 16-bit lanes).
template <size_t kLaneBytes>
__attribute__((target("avx2"))) inline uint64_t sum_of_lanes(__m256i v) {
  if constexpr (kLaneBytes == 1) {
    const __m256i sums = _mm256_sad_epu8(v, _mm256_setzero_si256());  // four 64-bit sums
    return static_cast<uint64_t>(_mm256_extract_epi64(sums, 0) + _mm256_extract_epi64(sums, 1) +
                                 _mm256_extract_epi64(sums, 2) + _mm256_extract_epi64(sums, 3));
  } else {
    uint16_t lanes[16];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), v);
    uint64_t sum = 0;
    for (uint16_t lane : lanes) sum += lane;
    return sum;
  }
}

// Adds one to the lanes of `below` / `above` where q (32 bytes of raw values) is <= lo / >= hi.
template <class R>
__attribute__((target("avx2"), always_inline)) inline void count_ends(__m256i q, __m256i lo,
                                                                      __m256i hi, __m256i& below,
                                                                      __m256i& above) {
  constexpr bool kSigned = std::is_signed_v<typename R::Value>;
  if constexpr (sizeof(typename R::Value) == 1) {
    const __m256i floor = kSigned ? _mm256_max_epi8(q, lo) : _mm256_max_epu8(q, lo);
    const __m256i ceiling = kSigned ? _mm256_min_epi8(q, hi) : _mm256_min_epu8(q, hi);
    below = _mm256_sub_epi8(below, _mm256_cmpeq_epi8(floor, lo));  // a match is -1
    above = _mm256_sub_epi8(above, _mm256_cmpeq_epi8(ceiling, hi));
  } else {
    const __m256i floor = kSigned ? _mm256_max_epi16(q, lo) : _mm256_max_epu16(q, lo);
    const __m256i ceiling = kSigned ? _mm256_min_epi16(q, hi) : _mm256_min_epu16(q, hi);
    below = _mm256_sub_epi16(below, _mm256_cmpeq_epi16(floor, lo));
    above = _mm256_sub_epi16(above, _mm256_cmpeq_epi16(ceiling, hi));
  }
}

// Dequantizes the four raw values at src into out.
template <class R, class Out>
__attribute__((target("avx2"), always_inline)) inline void dequantize_four(const uint8_t* src,
                                                                           __m256d add,
                                                                           __m256d scale,
                                                                           Out* out) {
  constexpr bool kSigned = std::is_signed_v<typename R::Value>;
  __m128i q;
  if constexpr (sizeof(typename R::Value) == 1) {
    int32_t word;
    std::memcpy(&word, src, sizeof(word));
    const __m128i packed = _mm_cvtsi32_si128(word);
    q = kSigned ? _mm_cvtepi8_epi32(packed) : _mm_cvtepu8_epi32(packed);
  } else {
    const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
    q = kSigned ? _mm_cvtepi16_epi32(packed) : _mm_cvtepu16_epi32(packed);
  }
  const __m256d real = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(q), add), scale);
  if constexpr (std::is_same_v<Out, double>) {
    _mm256_storeu_pd(out, real);
  } else {
    _mm_storeu_ps(out, _mm256_cvtpd_ps(real));
  }
}

// Split-dequantizes the eight raw values at src into out (split_dequantize, eight lanes).
template <class R>
__attribute__((target("avx2,fma"), always_inline)) inline void split_eight(const uint8_t* src,
                                                                           __m256 add, __m256 s1,
                                                                           __m256 s2, Split* out) {
  constexpr bool kSigned = std::is_signed_v<typename R::Value>;
  __m256i q;
  if constexpr (sizeof(typename R::Value) == 1) {
    const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
    q = kSigned ? _mm256_cvtepi8_epi32(packed) : _mm256_cvtepu8_epi32(packed);
  } else {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    q = kSigned ? _mm256_cvtepi16_epi32(packed) : _mm256_cvtepu16_epi32(packed);
  }
  const __m256 t = _mm256_add_ps(_mm256_cvtepi32_ps(q), add);
  const __m256 hi = _mm256_mul_ps(t, s1);
  const __m256 lo = _mm256_add_ps(_mm256_fmsub_ps(t, s1, hi), _mm256_mul_ps(t, s2));
  // hi, lo interleaved: the unpacks give pairs 0-1, 4-5 and 2-3, 6-7.
  const __m256 low = _mm256_unpacklo_ps(hi, lo), high = _mm256_unpackhi_ps(hi, lo);
  auto* floats = reinterpret_cast<float*>(out);
  _mm256_storeu_ps(floats, _mm256_permute2f128_ps(low, high, 0x20));
  _mm256_storeu_ps(floats + 8, _mm256_permute2f128_ps(low, high, 0x31));
}

template <class R>
__attribute__((target("avx2"))) inline __m256i broadcast(typename R::Value v) {
  if constexpr (sizeof(v) == 1) {
    return _mm256_set1_epi8(static_cast<char>(v));
  } else {
    return _mm256_set1_epi16(static_cast<int16_t>(v));
  }
}

// `split` is read for a Split output only.
template <class R, class Out>
__attribute__((target("avx2,fma"))) void dequantize_avx2(const uint8_t* src, uint64_t n, Affine a,
                                                         SplitAffine split, Bounds<R> bounds,
                                                         Out* out, DecodeCounts& counts) {
  constexpr bool kSplit = std::is_same_v<Out, Split>;
  constexpr size_t kRawBytes = sizeof(typename R::Value);
  constexpr uint64_t kPerVector = 32 / kRawBytes;
  constexpr uint64_t kGroup = kSplit ? 8 : 4;
  const __m256 split_add = _mm256_set1_ps(split.add);
  const __m256 s1 = _mm256_set1_ps(split.s1);
  const __m256 s2 = _mm256_set1_ps(split.s2);
  // Lane counters are summed before they can wrap: after 255 steps for bytes, fewer than 65535
  // for 16-bit lanes.
  constexpr uint64_t kSteps = kRawBytes == 1 ? 255 : 4096;
  const __m256d add = _mm256_set1_pd(a.add);
  const __m256d scale = _mm256_set1_pd(a.scale);
  const __m256i lo = broadcast<R>(bounds.lo);
  const __m256i hi = broadcast<R>(bounds.hi);
  uint64_t j = 0;
  while (n - j >= kPerVector) {
    const uint64_t end = j + std::min<uint64_t>((n - j) / kPerVector, kSteps) * kPerVector;
    __m256i below = _mm256_setzero_si256();
    __m256i above = _mm256_setzero_si256();
    for (; j < end; j += kPerVector) {
      const uint8_t* raw = src + j * kRawBytes;
      count_ends<R>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(raw)), lo, hi, below,
                    above);
      for (uint64_t k = 0; k < kPerVector; k += kGroup) {
        if constexpr (kSplit) {
          split_eight<R>(raw + k * kRawBytes, split_add, s1, s2, out + j + k);
        } else {
          dequantize_four<R, Out>(raw + k * kRawBytes, add, scale, out + j + k);
        }
      }
    }
    counts.at_min += sum_of_lanes<kRawBytes>(below);
    counts.at_max += sum_of_lanes<kRawBytes>(above);
  }
  for (; j < n; ++j) {
    const auto q = R::at(src, j);
    if constexpr (kSplit) {
      out[j] = split_dequantize(q, split);
    } else {
      out[j] = static_cast<Out>((static_cast<double>(q) + a.add) * a.scale);
    }
    counts.at_min += q <= bounds.lo ? 1 : 0;
    counts.at_max += q >= bounds.hi ? 1 : 0;
  }
}
#endif

// Per-tensor dequantization of n elements starting at p0 (not for the 4-bit types).
template <class R, class Out>
void dequantize_run(const uint8_t* bytes, uint64_t p0, uint64_t n, Affine a, Bounds<R> bounds,
                    Out* out, DecodeCounts& counts) {
#if defined(__x86_64__)
  if constexpr (sizeof(typename R::Value) <= 2) {
    if (kernels::active() == kernels::Isa::kAvx2) {
      return dequantize_avx2<R, Out>(bytes + p0 * sizeof(typename R::Value), n, a, {}, bounds, out,
                                     counts);
    }
  }
#endif
  count_saturation<R>(bytes, p0, n, bounds, counts);
  if constexpr (sizeof(typename R::Value) == 1) {
    if (n >= 1024) return dequantize_table<R, Out>(bytes, p0, n, a, out);
  }
  const double add = a.add;
  const double scale = a.scale;
#pragma omp simd
  for (uint64_t j = 0; j < n; ++j) {
    out[j] = static_cast<Out>((static_cast<double>(R::at(bytes, p0 + j)) + add) * scale);
  }
}

// 4-bit per tensor: tables of the 16 real values and of their saturation.
template <class R, class Out>
void dequantize_nibbles(const uint8_t* bytes, uint64_t p0, uint64_t n, Affine a, Bounds<R> bounds,
                        Out* out, DecodeCounts& counts) {
  Out table[16];
  uint8_t low[16];
  uint8_t high[16];
  for (int v = 0; v < 16; ++v) {
    const uint8_t pattern = static_cast<uint8_t>(v);
    const int32_t q = R::at(&pattern, 0);
    table[v] = static_cast<Out>((static_cast<double>(q) + a.add) * a.scale);
    low[v] = q <= bounds.lo ? 1 : 0;
    high[v] = q >= bounds.hi ? 1 : 0;
  }
  uint64_t below = 0;
  uint64_t above = 0;
  auto one = [&](int nibble, Out* o) {
    *o = table[nibble];
    below += low[nibble];
    above += high[nibble];
  };
  uint64_t j = 0;
  if (n > 0 && (p0 & 1)) {  // an odd start: the high nibble of the first byte
    one(bytes[p0 >> 1] >> 4, out);
    j = 1;
  }
  // Whole bytes: both values and both saturation flags of a byte from one lookup each.
  const uint8_t* src = bytes + ((p0 + j) >> 1);
  const uint64_t pairs = (n - j) / 2;
  struct Pair {
    Out lo_value, hi_value;
  };
  Pair pair_table[256];
  uint16_t pair_counts[256];  // saturated-low count | saturated-high count << 8
  for (int byte = 0; byte < 256; ++byte) {
    pair_table[byte] = {table[byte & 0xF], table[byte >> 4]};
    pair_counts[byte] = static_cast<uint16_t>((low[byte & 0xF] + low[byte >> 4]) |
                                              (high[byte & 0xF] + high[byte >> 4]) << 8);
  }
  for (uint64_t done = 0; done < pairs; done += kChunk) {
    const uint64_t end = std::min(pairs, done + kChunk);
    uint64_t packed_counts = 0;  // low count in bits 0..31, high in 32..63: no carry in a chunk
    for (uint64_t b = done; b < end; ++b) {
      std::memcpy(out + j + 2 * b, &pair_table[src[b]], sizeof(Pair));
      const uint64_t c = pair_counts[src[b]];
      packed_counts += (c & 0xFF) | ((c >> 8) << 32);
    }
    below += packed_counts & 0xFFFFFFFFu;
    above += packed_counts >> 32;
  }
  j += 2 * pairs;
  if (j < n) one(src[pairs] & 0xF, out + j);
  counts.at_min += below;
  counts.at_max += above;
}

// Unquantized integers: converted directly (one rounding), still counted for saturation.
template <class R, class Out>
void convert_run(const uint8_t* bytes, uint64_t p0, uint64_t n, Bounds<R> bounds, Out* out,
                 DecodeCounts& counts) {
  if constexpr (R::kPacked) {
    dequantize_nibbles<R, Out>(bytes, p0, n, Affine{}, bounds, out, counts);
  } else {
    count_saturation<R>(bytes, p0, n, bounds, counts);
#pragma omp simd
    for (uint64_t j = 0; j < n; ++j) out[j] = static_cast<Out>(R::at(bytes, p0 + j));
  }
}

struct ChannelLayout {
  uint64_t inner = 1;
  uint64_t channels = 1;
};

ChannelLayout channel_layout(const TensorRecord& t) {
  ChannelLayout layout;
  if (!t.quant.per_axis()) return layout;
  const auto axis = static_cast<size_t>(t.quant.axis);
  layout.channels = t.dims[axis];
  for (size_t d = axis + 1; d < t.dims.size(); ++d) layout.inner *= t.dims[d];
  return layout;
}

template <class R, class Out>
void dequantize_per_axis(const TensorRecord& t, const uint8_t* bytes, uint64_t phase,
                         uint64_t first, uint64_t count, Out* out, DecodeCounts& counts) {
  const ChannelLayout layout = channel_layout(t);
  const Bounds<R> bounds = bounds_of<R>(t);
  uint64_t channel = (first / layout.inner) % layout.channels;
  uint64_t pos = first % layout.inner;
  if (layout.inner >= kMinRun && !R::kPacked) {
    for (uint64_t done = 0; done < count;) {
      const uint64_t n = std::min(layout.inner - pos, count - done);
      dequantize_run<R, Out>(bytes, phase + done, n, affine_of(t.quant, channel), bounds,
                             out + done, counts);
      done += n;
      pos = 0;
      channel = channel + 1 == layout.channels ? 0 : channel + 1;
    }
    return;
  }
  std::vector<Affine> affine(layout.channels);
  for (uint64_t c = 0; c < layout.channels; ++c) affine[c] = affine_of(t.quant, c);
  uint64_t below = 0;
  uint64_t above = 0;
  for (uint64_t j = 0; j < count; ++j) {
    const auto q = R::at(bytes, phase + j);
    const Affine& a = affine[channel];
    out[j] = static_cast<Out>((static_cast<double>(q) + a.add) * a.scale);
    below += q <= bounds.lo ? 1u : 0u;
    above += q >= bounds.hi ? 1u : 0u;
    if (++pos == layout.inner) {
      pos = 0;
      channel = channel + 1 == layout.channels ? 0 : channel + 1;
    }
  }
  counts.at_min += below;
  counts.at_max += above;
}

template <class R, class Out>
DecodeCounts decode_integer(const TensorRecord& t, const uint8_t* bytes, uint64_t first,
                            uint64_t count, Out* out) {
  DecodeCounts counts;
  if (count == 0) return counts;
  const uint64_t phase = R::kPacked ? first % 2 : 0;
  if (!t.quant.is_quantized()) {
    convert_run<R, Out>(bytes, phase, count, bounds_of<R>(t), out, counts);
  } else if (t.quant.per_axis()) {
    dequantize_per_axis<R, Out>(t, bytes, phase, first, count, out, counts);
  } else if constexpr (R::kPacked) {
    dequantize_nibbles<R, Out>(bytes, phase, count, affine_of(t.quant, 0), bounds_of<R>(t), out,
                               counts);
  } else {
    dequantize_run<R, Out>(bytes, phase, count, affine_of(t.quant, 0), bounds_of<R>(t), out,
                           counts);
  }
  return counts;
}

// Floats and BOOL_8 (0 or 1): converted one by one (exact, except FLOAT_64 into float).
template <class R, class Out>
void decode_plain(const uint8_t* bytes, uint64_t count, Out* out) {
#pragma omp simd
  for (uint64_t j = 0; j < count; ++j) out[j] = static_cast<Out>(R::at(bytes, j));
}

template <class Out>
DecodeCounts decode_as(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                       uint64_t count, Out* out) {
  return elements::visit_dtype(t.dtype, [&](auto reader) -> DecodeCounts {
    using R = decltype(reader);
    if constexpr (std::is_same_v<R, Plain<Out>>) {
      if (count > 0) std::memcpy(out, bytes, count * sizeof(Out));
      return {};
    } else if constexpr (elements::kIsFloat<R> || elements::kIsBool<R>) {
      decode_plain<R, Out>(bytes, count, out);
      return {};
    } else {
      return decode_integer<R, Out>(t, bytes, first_element, count, out);
    }
  });
}

// A per-tensor 8- or 16-bit encoding with an affine map split_affine takes: decoded straight into
// Split. False (nothing written) otherwise.
template <class R>
bool split_per_tensor(const TensorRecord& t, const uint8_t* bytes, uint64_t count, Split* out,
                      DecodeCounts& counts) {
  if constexpr (elements::kIsFloat<R> || elements::kIsBool<R> || R::kPacked ||
                sizeof(typename R::Value) > 2) {
    return false;
  } else {
    if (!t.quant.is_quantized() || t.quant.per_axis()) return false;
    const Affine a = affine_of(t.quant, 0);
    const std::optional<SplitAffine> split = split_affine(a);
    if (!split) return false;
#if defined(__x86_64__)
    if (kernels::active() == kernels::Isa::kAvx2) {
      dequantize_avx2<R, Split>(bytes, count, a, *split, bounds_of<R>(t), out, counts);
      return true;
    }
#endif
    count_saturation<R>(bytes, 0, count, bounds_of<R>(t), counts);
    for (uint64_t j = 0; j < count; ++j) out[j] = split_dequantize(R::at(bytes, j), *split);
    return true;
  }
}

}  // namespace

std::optional<SaturationRange> saturation_range(const TensorRecord& t) {
  const DTypeInfo entry = info(t.dtype);
  if (entry.kind == DTypeKind::kFloat || entry.kind == DTypeKind::kBool) return std::nullopt;
  const std::optional<RawRange> full = integer_range(t.dtype);
  if (!full) return std::nullopt;
  unsigned bits = entry.bits;
  if (t.quant.bitwidth > 0 && t.quant.bitwidth < bits) bits = t.quant.bitwidth;
  SaturationRange range;
  if (entry.kind == DTypeKind::kUnsignedInt) {
    range.min = 0;
    range.max = bits >= 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
  } else {
    range.min = bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    range.max = bits >= 64 ? static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                           : (uint64_t{1} << (bits - 1)) - 1;
  }
  return range;
}

DecodeCounts decode(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                    uint64_t count, double* out) {
  return decode_as(t, bytes, first_element, count, out);
}

DecodeCounts decode(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                    uint64_t count, float* out) {
  return decode_as(t, bytes, first_element, count, out);
}

DecodeCounts decode(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                    uint64_t count, Split* out) {
  DecodeCounts counts;
  const bool direct = count > 0 && elements::visit_dtype(t.dtype, [&](auto reader) {
                        return split_per_tensor<decltype(reader)>(t, bytes, count, out, counts);
                      });
  if (direct) return counts;
  // Through double, a piece at a time (an even number of elements: 4-bit pieces stay in phase).
  constexpr uint64_t kPiece = 1024;
  double values[kPiece];
  const unsigned bits = info(t.dtype).bits;
  for (uint64_t done = 0; done < count; done += kPiece) {
    const uint64_t n = std::min(kPiece, count - done);
    counts += decode_as(t, bytes + done * bits / 8, first_element + done, n, values);
    for (uint64_t j = 0; j < n; ++j) out[done + j] = Split::of(values[j]);
  }
  return counts;
}

uint64_t channel_of(const TensorRecord& t, uint64_t element) {
  const ChannelLayout layout = channel_layout(t);
  if (layout.inner == 0 || layout.channels == 0) return 0;  // no elements at all
  return (element / layout.inner) % layout.channels;
}

void channels_of(const TensorRecord& t, uint64_t first_element, uint64_t count, uint32_t* out) {
  const ChannelLayout layout = channel_layout(t);
  if (count == 0 || layout.inner == 0 || layout.channels == 0) return;
  auto channel = static_cast<uint32_t>((first_element / layout.inner) % layout.channels);
  uint64_t pos = first_element % layout.inner;
  for (uint64_t j = 0; j < count;) {
    const uint64_t n = std::min(layout.inner - pos, count - j);
    std::fill_n(out + j, n, channel);
    j += n;
    pos = 0;
    channel = channel + 1 == layout.channels ? 0 : channel + 1;
  }
}

std::optional<uint16_t> split_zero_code(const TensorRecord& t) {
  const unsigned width = info(t.dtype).bits;
  const Quantization& quant = t.quant;
  if ((width != 8 && width != 16) || !quant.is_quantized() || quant.per_axis() ||
      quant.offsets.size() != 1) {
    return std::nullopt;
  }
  const auto range = saturation_range(t);
  const int64_t code =
      quant.convention == QuantConvention::kQnnOffset ? -quant.offsets[0] : quant.offsets[0];
  const bool inside =
      range && code > range->min && (code < 0 || static_cast<uint64_t>(code) < range->max);
  if (!inside) return std::nullopt;
  const auto raw = static_cast<uint16_t>(code);  // two's complement, as stored
  const uint8_t bytes[2] = {static_cast<uint8_t>(raw & 0xFF), static_cast<uint8_t>(raw >> 8)};
  Split value{1.0f, 1.0f};
  decode(t, bytes, 0, 1, &value);
  if (std::bit_cast<uint32_t>(value.hi) != 0 || std::bit_cast<uint32_t>(value.lo) != 0) {
    return std::nullopt;
  }
  return width == 8 ? static_cast<uint16_t>(raw & 0xFF) : raw;
}

}  // namespace qd::compare
