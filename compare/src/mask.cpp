#include "qnn_debug/compare/mask.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "mask_filter.h"
#include "qnn_debug/compare/decode.h"

namespace qd::compare {

std::optional<double> float_lowest(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return -65504.0;
    case DType::kBFloat16:
      return -0x1.fep127;  // (2 - 2^-7) 2^127
    case DType::kFloat32:
      return -static_cast<double>(std::numeric_limits<float>::max());
    case DType::kFloat64:
      return -std::numeric_limits<double>::max();
    default:
      return std::nullopt;
  }
}

namespace {

// Per channel, the highest device value that still stands for the lowest raw code: half a step
// above it, since a decoded value may be a float neighbour of the exact one. Empty when the
// encoding cannot be read per element.
std::vector<double> lowest_code_floors(const TensorRecord& device, ChannelMap channels) {
  const Quantization& quant = device.quant;
  const auto raw = saturation_range(device);
  if (!raw || (quant.per_axis() && channels.count != quant.scales.size())) return {};
  std::vector<double> floors;
  for (size_t c = 0; c < quant.scales.size(); ++c) {
    const double scale = std::fabs(quant.scales[c]);
    if (!(scale > 0) || !std::isfinite(scale)) return {};  // linted elsewhere
    floors.push_back(quant.dequantize(static_cast<double>(raw->min), c) + scale / 2);
  }
  return floors;
}

}  // namespace

MaskRule::MaskRule(const TensorRecord& ref, const TensorRecord& device, ChannelMap channels)
    : channels_(channels) {
  const std::optional<double> ref_lowest = float_lowest(ref.dtype);
  if (!ref_lowest) return;
  ref_floor_ = *ref_lowest;
  if (device.quant.is_quantized()) {
    device_floors_ = lowest_code_floors(device, channels);
    if (!device.quant.per_axis()) channels_ = {};
  } else if (const std::optional<double> lowest = float_lowest(device.dtype)) {
    device_floors_ = {*lowest};
    channels_ = {};
  }
  active_ = !device_floors_.empty();
}

namespace {

inline float hi_of(float v) { return v; }
inline float hi_of(const Split& v) { return v.hi; }
inline double value_of(float v) { return v; }
inline double value_of(const Split& v) { return static_cast<double>(v); }

// Whether some reference value may be masked: its float rounding at or below the floor's (a
// rounding never crosses it), in one vectorizable pass, the only cost to a piece without masks.
template <class R>
bool any_at_or_below(const R* r, uint64_t count, float floor) {
  int found = 0;
#pragma omp simd reduction(| : found)
  for (uint64_t i = 0; i < count; ++i) found |= hi_of(r[i]) <= floor ? 1 : 0;
  return found != 0;
}

template <class T>
T not_a_number() {
  if constexpr (std::is_same_v<T, Split>) {
    return {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  } else {
    return std::numeric_limits<T>::quiet_NaN();
  }
}

}  // namespace

template <class T>
std::vector<T>& MaskFilter::scratch(int side) {
  if constexpr (std::is_same_v<T, Split>) {
    return split_scratch_[side];
  } else {
    return float_scratch_[side];
  }
}

template <class R, class D>
uint64_t MaskFilter::apply(const R*& r, const D*& d, uint64_t count, uint64_t first) {
  if (!rule_.active()) return 0;
  // The floor as float, rounded up: a value rounding to it or below is a candidate.
  const float floor = std::nextafter(static_cast<float>(rule_.reference_floor()), 0.0f);
  if (!any_at_or_below(r, count, floor)) return 0;
  std::vector<R>& rs = scratch<R>(0);
  std::vector<D>& ds = scratch<D>(1);
  rs.assign(r, r + count);
  ds.assign(d, d + count);
  uint64_t masked = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (!rule_.masked(value_of(rs[i]), value_of(ds[i]), first + i)) continue;
    rs[i] = not_a_number<R>();
    ds[i] = not_a_number<D>();
    ++masked;
  }
  r = rs.data();
  d = ds.data();
  return masked;
}

template uint64_t MaskFilter::apply(const float*&, const float*&, uint64_t, uint64_t);
template uint64_t MaskFilter::apply(const float*&, const Split*&, uint64_t, uint64_t);
template uint64_t MaskFilter::apply(const Split*&, const float*&, uint64_t, uint64_t);
template uint64_t MaskFilter::apply(const Split*&, const Split*&, uint64_t, uint64_t);

}  // namespace qd::compare
