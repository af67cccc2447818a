#include "ideal_noise.h"

#include <algorithm>
#include <cmath>

#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/metrics.h"

namespace qd::compare {
namespace {

inline double value_of(float v) { return v; }
inline double value_of(double v) { return v; }
inline double value_of(const Split& v) { return static_cast<double>(v); }

}  // namespace

IdealNoise::IdealNoise(const TensorRecord& device, ChannelMap channels) : channels_(channels) {
  const Quantization& quant = device.quant;
  const auto raw = saturation_range(device);
  if (!quant.is_quantized() || !raw) return;
  if (quant.per_axis() && channels.count != quant.scales.size()) return;
  if (!quant.per_axis()) channels_ = {};
  for (size_t c = 0; c < quant.scales.size(); ++c) {
    const double offset = static_cast<double>(quant.offsets[c]);
    if (!(quant.scales[c] > 0) || !std::isfinite(quant.scales[c])) return;  // linted elsewhere
    scales_.push_back(quant.scales[c]);
    offsets_.push_back(quant.convention == QuantConvention::kQnnOffset ? offset : -offset);
  }
  raw_min_ = static_cast<double>(raw->min);
  raw_max_ = static_cast<double>(raw->max);
}

template <class R, class D>
void IdealNoise::add(const R* r, const D* d, uint64_t count, uint64_t first) {
  if (!active()) return;
  double signal = 0, noise = 0;
  uint64_t n = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const double rv = value_of(r[i]);
    if (!std::isfinite(rv) || !std::isfinite(value_of(d[i]))) continue;
    const size_t c = channels_.count > 1 ? ((first + i) / channels_.inner) % channels_.count : 0;
    const double scale = scales_[c], offset = offsets_[c];
    const double q = std::clamp(std::nearbyint(rv / scale) - offset, raw_min_, raw_max_);
    const double e = (q + offset) * scale - rv;
    signal += rv * rv;
    noise += e * e;
    ++n;
  }
  signal_ += signal;
  noise_ += noise;
  n_ += n;
}

void IdealNoise::merge(const IdealNoise& other) {
  signal_ += other.signal_;
  noise_ += other.noise_;
  n_ += other.n_;
}

std::optional<double> IdealNoise::sqnr_db() const {
  if (!active() || n_ == 0) return std::nullopt;
  return sqnr_of(signal_, noise_);
}

template void IdealNoise::add(const float*, const float*, uint64_t, uint64_t);
template void IdealNoise::add(const Split*, const Split*, uint64_t, uint64_t);
template void IdealNoise::add(const float*, const Split*, uint64_t, uint64_t);
template void IdealNoise::add(const Split*, const float*, uint64_t, uint64_t);

}  // namespace qd::compare
