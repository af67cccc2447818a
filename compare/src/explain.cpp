#include "qnn_debug/compare/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/layout.h"
#include "qnn_debug/compare/mask.h"

namespace qd::compare {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();
constexpr uint64_t kMapPiece = uint64_t{1} << 16;

double capped(double sqnr) { return std::min(sqnr, kExactSqnrDb); }

// Calls visit(k, device index of k) for k = 0 .. count - 1, mapping a piece at a time.
template <typename Visit>
Status for_each_mapped(const Permuter& permuter, uint64_t count, Visit visit) {
  std::vector<uint64_t> index;
  for (uint64_t first = 0; first < count; first += kMapPiece) {
    const uint64_t piece = std::min<uint64_t>(kMapPiece, count - first);
    QD_RETURN_IF_ERROR(permuter.map(first, piece, &index));
    for (uint64_t k = 0; k < piece; ++k) visit(first + k, index[k]);
  }
  return Status::ok();
}

// `dev` read with dims `written` through `plan`: element k of the result is dev[the device index
// of index k], in the plan's (permuted) order.
Result<std::vector<float>> reread(std::span<const float> dev, const LayoutPlan& plan,
                                  const std::vector<uint64_t>& written) {
  QD_ASSIGN_OR_RETURN(const Permuter permuter, Permuter::create(plan, written));
  std::vector<float> out(dev.size());
  QD_RETURN_IF_ERROR(
      for_each_mapped(permuter, dev.size(), [&](uint64_t k, uint64_t i) { out[k] = dev[i]; }));
  return out;
}

std::vector<float> reversed_along(std::span<const float> dev, const std::vector<uint64_t>& dims,
                                  size_t axis) {
  uint64_t inner = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const uint64_t size = dims[axis];
  const uint64_t block = size * inner;
  std::vector<float> out(dev.size());
  for (uint64_t base = 0; base < dev.size(); base += block) {
    for (uint64_t c = 0; c < size; ++c) {
      std::copy_n(dev.begin() + static_cast<ptrdiff_t>(base + (size - 1 - c) * inner), inner,
                  out.begin() + static_cast<ptrdiff_t>(base + c * inner));
    }
  }
  return out;
}

// A wrong order the device data may be in, relative to the reference's: the permutation reads
// the device values (dims `read_dims`) into `order`; the result is compared element by element
// in that order. Two ways to get it wrong, for each permutation: the data was written in the
// permuted layout and read as the reference's (read_dims are the permuted dims), or the data was
// in the reference's layout and a reader permuted it (read_dims are the reference's).
struct Misreading {
  std::string name;
  std::vector<uint8_t> order;  // result axis i is read axis order[i]
  std::vector<uint64_t> read_dims;
};

// Whether reading with `order` moves any element: it does unless only size-1 axes move.
bool moves_data(const std::vector<uint8_t>& order, const std::vector<uint64_t>& dims) {
  int last = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (dims[order[i]] == 1) continue;
    if (order[i] < last) return true;
    last = order[i];
  }
  return false;
}

std::vector<Misreading> misreadings(const std::vector<uint64_t>& dims) {
  const size_t rank = dims.size();
  std::vector<std::pair<std::string, std::vector<uint8_t>>> orders;
  if (rank >= 2) {
    std::vector<uint8_t> swap_last(rank);
    for (size_t i = 0; i < rank; ++i) swap_last[i] = static_cast<uint8_t>(i);
    std::swap(swap_last[rank - 2], swap_last[rank - 1]);
    orders.emplace_back(rank == 4 ? "H and W swapped" : "the last two axes transposed", swap_last);
  }
  if (rank == 4) {
    orders.emplace_back("channel-last data read as channel-first",
                        std::vector<uint8_t>{0, 3, 1, 2});
    orders.emplace_back("channel-first data read as channel-last",
                        std::vector<uint8_t>{0, 2, 3, 1});
  }
  std::vector<Misreading> out;
  for (const auto& [name, order] : orders) {
    std::vector<uint64_t> written(rank);  // the permuted layout the reference was written in
    for (size_t i = 0; i < rank; ++i) written[order[i]] = dims[i];
    if (moves_data(order, written)) out.push_back({name, order, written});
    if (moves_data(order, dims) && written != dims) out.push_back({name, order, dims});
  }
  return out;
}

// The real range of raw values [lo, hi] under channel `c`'s scale and offset.
std::pair<double, double> real_range(const TensorRecord& device, size_t c) {
  const auto raw = saturation_range(device);
  const double lo = device.quant.dequantize(static_cast<double>(raw->min), c);
  const double hi = device.quant.dequantize(static_cast<double>(raw->max), c);
  return {std::min(lo, hi), std::max(lo, hi)};
}

// `r` quantized with scale and offset (QNN convention) and clamped to the raw range, as a real.
double fake_quantize(double r, double scale, double offset, double raw_min, double raw_max) {
  const double q = std::clamp(std::nearbyint(r / scale) - offset, raw_min, raw_max);
  return (q + offset) * scale;
}

std::string percent(double fraction) { return fmt::format("{:.3g}%", fraction * 100); }

}  // namespace

double sqnr_db(std::span<const float> ref, std::span<const float> dev) {
  double signal = 0, noise = 0;
  for (size_t i = 0; i < ref.size() && i < dev.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(dev[i])) continue;
    const double r = ref[i];
    const double e = static_cast<double>(dev[i]) - r;
    signal += r * r;
    noise += e * e;
  }
  return sqnr_of(signal, noise);
}

namespace {

uint64_t finite_pairs(std::span<const float> ref, std::span<const float> dev) {
  uint64_t n = 0;
  for (size_t i = 0; i < ref.size() && i < dev.size(); ++i) {
    n += std::isfinite(ref[i]) && std::isfinite(dev[i]) ? 1 : 0;
  }
  return n;
}

}  // namespace

std::vector<LayoutTrial> try_layouts(std::span<const float> ref, std::span<const float> dev,
                                     const std::vector<uint64_t>& dims, int channel_axis) {
  std::vector<LayoutTrial> trials;
  // A reading that compares fewer pairs than the device's own (its NaN, Inf or masked positions
  // moved onto the reference's values) measures less, not better: no evidence of a mix-up.
  const uint64_t compared = finite_pairs(ref, dev);
  const auto trial = [&](std::string name, std::span<const float> values) {
    if (compared > 0 && finite_pairs(ref, values) >= compared) {
      trials.push_back({std::move(name), sqnr_db(ref, values)});
    }
  };
  for (const Misreading& m : misreadings(dims)) {
    Result<std::vector<float>> values = reread(dev, LayoutPlan{m.order, false, false}, m.read_dims);
    if (values.is_ok()) trial(m.name, *values);
  }
  std::vector<size_t> channel_axes;
  if (channel_axis >= 0 && static_cast<size_t>(channel_axis) < dims.size()) {
    channel_axes.push_back(static_cast<size_t>(channel_axis));
  } else if (dims.size() >= 2) {
    channel_axes.push_back(1);                                     // NCHW's channels
    if (dims.size() > 2) channel_axes.push_back(dims.size() - 1);  // NHWC's
  }
  for (const size_t axis : channel_axes) {
    if (dims[axis] < 2) continue;
    trial("channels reversed (axis " + std::to_string(axis) + ")", reversed_along(dev, dims, axis));
  }
  std::stable_sort(trials.begin(), trials.end(), [](const LayoutTrial& a, const LayoutTrial& b) {
    return a.sqnr_db > b.sqnr_db;
  });
  return trials;
}

FittedEncoding fit_encoding(double min, double max, bool is_signed, int bitwidth) {
  FittedEncoding fit;
  const double levels = std::ldexp(1.0, bitwidth);
  const double raw_min = is_signed ? -levels / 2 : 0;
  const double raw_max = raw_min + levels - 1;
  fit.min = std::min(min, 0.0);
  fit.max = std::max(max, 0.0);
  fit.is_signed = is_signed;
  fit.bitwidth = bitwidth;
  fit.scale = fit.max > fit.min ? (fit.max - fit.min) / (raw_max - raw_min) : 1.0;
  // QNN: real = (q + offset) * scale, and raw_min must stand for min.
  fit.offset = static_cast<int64_t>(std::nearbyint(fit.min / fit.scale - raw_min));
  return fit;
}

FittedEncoding fit_encoding(double min, double max, const TensorRecord& device) {
  const auto raw = saturation_range(device);
  const double span = static_cast<double>(raw->max) - static_cast<double>(raw->min);
  return fit_encoding(min, max, raw->min < 0, static_cast<int>(std::lround(std::log2(span + 1))));
}

namespace {

// The SQNR `ref` keeps when quantized with `fit`, over the pairs where both sides are finite.
double fitted_sqnr_db(std::span<const float> ref, std::span<const float> dev,
                      const FittedEncoding& fit) {
  const double levels = std::ldexp(1.0, fit.bitwidth);
  const double raw_min = fit.is_signed ? -levels / 2 : 0;
  const double offset = static_cast<double>(fit.offset);
  double signal = 0, noise = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(dev[i])) continue;
    const double r = ref[i];
    const double e = fake_quantize(r, fit.scale, offset, raw_min, raw_min + levels - 1) - r;
    signal += r * r;
    noise += e * e;
  }
  return sqnr_of(signal, noise);
}

}  // namespace

EncodingEvidence examine_encoding(std::span<const float> ref, std::span<const float> dev,
                                  const TensorRecord& device, std::span<const uint32_t> channel,
                                  double pass_db) {
  EncodingEvidence out;
  const auto raw = saturation_range(device);
  const double raw_min = static_cast<double>(raw->min);
  const double raw_max = static_cast<double>(raw->max);
  const size_t channels = device.quant.scales.size();
  std::vector<std::pair<double, double>> ranges;
  for (size_t c = 0; c < channels; ++c) ranges.push_back(real_range(device, c));

  double ref_min = kUnbounded, ref_max = -kUnbounded;
  double signal = 0, ideal_noise = 0, kept_signal = 0, kept_noise = 0;
  uint64_t finite = 0, below = 0, above = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(dev[i])) continue;
    const size_t c = channel.empty() ? 0 : std::min<size_t>(channel[i], channels - 1);
    const double r = ref[i];
    const double scale = device.quant.scales[c];
    const double offset = device.quant.convention == QuantConvention::kQnnOffset
                              ? static_cast<double>(device.quant.offsets[c])
                              : -static_cast<double>(device.quant.offsets[c]);
    const double ideal = fake_quantize(r, scale, offset, raw_min, raw_max) - r;
    signal += r * r;
    ideal_noise += ideal * ideal;
    ++finite;
    ref_min = std::min(ref_min, r);
    ref_max = std::max(ref_max, r);
    if (r < ranges[c].first) {
      ++below;
    } else if (r > ranges[c].second) {
      ++above;
    } else {
      const double e = static_cast<double>(dev[i]) - r;
      kept_signal += r * r;
      kept_noise += e * e;
    }
  }
  if (finite == 0) return out;
  out.ideal_sqnr_db = sqnr_of(signal, ideal_noise);
  out.below_fraction = static_cast<double>(below) / static_cast<double>(finite);
  out.above_fraction = static_cast<double>(above) / static_cast<double>(finite);
  out.sqnr_without_clipped_db = sqnr_of(kept_signal, kept_noise);
  double widest = 0;
  for (const auto& [lo, hi] : ranges) widest = std::max(widest, hi - lo);
  out.range_fraction = widest > 0 ? (ref_max - ref_min) / widest : 1;
  out.fitted = fit_encoding(ref_min, ref_max, device);
  out.fitted_sqnr_db = fitted_sqnr_db(ref, dev, out.fitted);
  if (out.fitted_sqnr_db < pass_db && out.fitted.bitwidth < kWiderBitwidth) {
    WiderEncoding wider{fit_encoding(ref_min, ref_max, out.fitted.is_signed, kWiderBitwidth), 0};
    wider.sqnr_db = fitted_sqnr_db(ref, dev, wider.encoding);
    out.wider = wider;
  }
  return out;
}

namespace {

// A run's tensors decoded whole for the measurements, the device in the reference's layout with
// each element's channel. Unset when a side cannot be read or is above the budget.
struct PairValues {
  std::vector<float> ref, dev;
  std::vector<uint32_t> channel;  // per-axis device encodings only
};

Result<std::vector<float>> decode_whole(const StoreReader& store, const TensorEntry& t) {
  QD_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, store.read_tensor(t));
  std::vector<float> values(t.element_count());
  decode(t, bytes.data(), 0, values.size(), values.data());
  return values;
}

std::optional<PairValues> read_pair(const StoreReader& ref_store, const StoreReader& dev_store,
                                    const PairResult& pair, uint64_t budget) {
  const TensorEntry& ref = *pair.pair.ref;
  const TensorEntry& dev = *pair.pair.device;
  if (!pair.layout || ref.element_count() > budget || dev.element_count() != ref.element_count()) {
    return std::nullopt;
  }
  Result<std::vector<float>> r = decode_whole(ref_store, ref);
  Result<std::vector<float>> d = decode_whole(dev_store, dev);
  if (!r.is_ok() || !d.is_ok()) return std::nullopt;
  Result<Permuter> permuter = Permuter::create(*pair.layout, dev.dims);
  if (!permuter.is_ok()) return std::nullopt;
  PairValues values;
  values.ref = std::move(r).value();
  values.dev.resize(values.ref.size());
  if (dev.quant.per_axis()) values.channel.resize(values.ref.size());
  const Status mapped = for_each_mapped(*permuter, values.ref.size(), [&](uint64_t k, uint64_t i) {
    values.dev[k] = (*d)[i];
    if (!values.channel.empty()) values.channel[k] = static_cast<uint32_t>(channel_of(dev, i));
  });
  if (!mapped.is_ok()) return std::nullopt;
  // Masked positions carry no error (mask.h): NaN on both sides, which every measurement skips,
  // as the metrics leave them out.
  const MaskRule mask(ref, dev, channel_view(ref, dev, *pair.layout).map);
  if (mask.active()) {
    for (size_t k = 0; k < values.ref.size(); ++k) {
      if (!mask.masked(values.ref[k], values.dev[k], k)) continue;
      values.ref[k] = values.dev[k] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  return values;
}

// The channel axis in the reference's layout: the device encoding's, mapped back; -1 for none.
int reference_channel_axis(const PairResult& pair) {
  if (!pair.pair.device->quant.per_axis()) return -1;
  const std::optional<uint32_t> axis =
      channel_view(*pair.pair.ref, *pair.pair.device, *pair.layout).axis;
  return axis ? static_cast<int>(*axis) : -1;
}

// A group's worst output as noise powers relative to its signal (n(x) = 10^(-x/10), excess.h):
// what the device lost, and the shares the causes stand for (docs/metrics.md, 6b). The shares add
// up to `total` when the op passes on its input's relative error unchanged; a measured own error
// (the replay) or a gain fitted to the input's error move the rest to `input`.
struct NoiseBudget {
  double total = 0;     // n(S)
  double input = 0;     // what its inputs carry in
  double rounding = 0;  // its encoding's own rounding, n(ideal); 0 without an encoding
  double own = 0;       // what the op adds beyond an ideal kernel with its encoding
  bool quantized = false;
  bool through_gain = false;  // the input's error reaches the output through the op's own gain
  // The values measured the op's own error below the judge's estimate (a gain, a softmax of the
  // device's input, unmasked channels): the estimate the excess rule judged no longer holds.
  bool own_remeasured = false;
};

// How much SQNR removing `part` of the budget's total gains, with at least `rest` remaining:
// 10 log10(total / max(total - part, rest)), at least 0 and at most C - S.
double explained_by(const NoiseBudget& b, double part, double rest) {
  if (b.total <= 0) return 0;
  const double remaining = std::max({b.total - part, rest, relative_noise(kExactSqnrDb)});
  return std::max(0.0, 10 * std::log10(b.total / remaining));
}

// What an encoding fix that reaches `fixed_sqnr_db` instead of the device's `ideal` gains: its
// rounding share replaced by the fix's.
double explained_by_fix(const NoiseBudget& b, double fixed_sqnr_db) {
  const double fixed = relative_noise(fixed_sqnr_db);
  return explained_by(b, b.rounding - fixed, b.input + b.own + fixed);
}

std::string_view how_measured(ExcessSource source) {
  switch (source) {
    case ExcessSource::kIsolated:
      return " (measured by its replay)";
    case ExcessSource::kKernel:
      return " (estimated from the kernel part)";
    case ExcessSource::kTotal:
      break;
  }
  return " (estimated from the total)";
}

double rms_ratio(double noise, double reference) {
  return reference > 0 ? std::sqrt(noise / reference) : kUnbounded;
}

struct ChannelSums {
  double out_out = 0, out_in = 0, in_in = 0;  // of the errors
  double ref_gain = 0, ref_in = 0;            // sum r_o r_i and sum r_i^2 of the reference
};

// The output error left once each channel's own gain carries the input's error to it:
// sum over channels c of sum (e_o - g_c e_i)^2, where g_c = sum r_o r_i / sum r_i^2 is the gain
// the reference itself shows from that input to the output (c = (k / inner) % channels). The gain
// is the op's, not fitted to the errors, so it cannot absorb an error the op adds.
double residual_through_gain(const PairValues& out, const PairValues& in, uint64_t channels,
                             uint64_t inner) {
  std::vector<ChannelSums> sums(channels);
  for (size_t k = 0; k < out.ref.size(); ++k) {
    const double r_out = out.ref[k], r_in = in.ref[k];
    const double e_out = static_cast<double>(out.dev[k]) - r_out;
    const double e_in = static_cast<double>(in.dev[k]) - r_in;
    if (!std::isfinite(e_out) || !std::isfinite(e_in)) continue;
    ChannelSums& s = sums[(k / inner) % channels];
    s.out_out += e_out * e_out;
    s.out_in += e_out * e_in;
    s.in_in += e_in * e_in;
    s.ref_gain += r_out * r_in;
    s.ref_in += r_in * r_in;
  }
  double residual = 0;
  for (const ChannelSums& s : sums) {
    const double gain = s.ref_in > 0 ? s.ref_gain / s.ref_in : 0;
    residual += std::max(0.0, s.out_out - 2 * gain * s.out_in + gain * gain * s.in_in);
  }
  return residual;
}

// The output's noise relative to its signal that its own gain on the input's error does not
// explain: the smallest over one gain for the tensor, one per index of its last axis and (rank 3
// or more) one per index of axis 1, each tried only with `min_per_channel` elements a channel
// (fewer give no stable gain). nullopt: no gain applies.
std::optional<double> gain_residual(const PairValues& out, const PairValues& in,
                                    const std::vector<uint64_t>& dims, uint64_t min_per_channel) {
  const uint64_t n = out.ref.size();
  if (n == 0 || in.ref.size() != n || dims.empty()) return std::nullopt;
  double signal = 0;
  for (size_t k = 0; k < n; ++k) {
    if (std::isfinite(out.ref[k]) && std::isfinite(out.dev[k])) {
      signal += static_cast<double>(out.ref[k]) * out.ref[k];
    }
  }
  if (signal <= 0) return std::nullopt;
  std::vector<std::pair<uint64_t, uint64_t>> gains{{1, 1}, {dims.back(), 1}};
  if (dims.size() >= 3) {
    uint64_t inner = 1;
    for (size_t d = 2; d < dims.size(); ++d) inner *= dims[d];
    gains.emplace_back(dims[1], inner);
  }
  std::optional<double> best;
  for (const auto& [channels, inner] : gains) {
    if (channels == 0 || n / channels < min_per_channel) continue;
    const double residual = residual_through_gain(out, in, channels, inner);
    if (!best || residual < *best) best = residual;
  }
  if (!best) return std::nullopt;
  return *best / signal;
}

// A softmax along the last axis carries its input's error through its own Jacobian, which no
// per-channel gain describes (a score error moves a peaked row's probabilities by more than its
// own relative size). The op's own error is then measured exactly: the device output against the
// softmax of the device's own input, computed here in float64, relative to the reference output's
// power. Masked positions (NaN after read_pair) take no weight; a row with none left is skipped.
// nullopt when the shapes differ or nothing is left.
bool is_softmax(std::string_view op_type) {
  std::string lower(op_type);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("softmax") != std::string::npos && lower.find("log") == std::string::npos;
}

std::optional<double> softmax_residual(const PairValues& out, const PairValues& in,
                                       const std::vector<uint64_t>& dims) {
  const uint64_t n = out.ref.size();
  if (dims.empty() || dims.back() == 0 || in.ref.size() != n) return std::nullopt;
  const uint64_t width = dims.back();
  double signal = 0, residual = 0;
  std::vector<double> exps(width);
  for (uint64_t row = 0; row + width <= n; row += width) {
    double peak = -kUnbounded;
    for (uint64_t j = 0; j < width; ++j) {
      if (std::isfinite(in.dev[row + j])) peak = std::max(peak, double{in.dev[row + j]});
    }
    if (!std::isfinite(peak)) continue;
    double sum = 0;
    for (uint64_t j = 0; j < width; ++j) {
      const float x = in.dev[row + j];
      exps[j] = std::isfinite(x) ? std::exp(static_cast<double>(x) - peak) : 0;
      sum += exps[j];
    }
    for (uint64_t j = 0; j < width; ++j) {
      const double r = out.ref[row + j], d = out.dev[row + j];
      if (!std::isfinite(r) || !std::isfinite(d)) continue;
      const double e = d - exps[j] / sum;
      signal += r * r;
      residual += e * e;
    }
  }
  if (!(signal > 0)) return std::nullopt;
  return residual / signal;
}

// What the input's error would be if the op weighed each of its channels (along the last axis)
// alike: its relative noise without the channels carrying a massive activation (signal power more
// than kMassiveChannel times the median channel's), which otherwise hide the error of the others.
// nullopt when no channel is massive.
constexpr double kMassiveChannel = 100;

std::optional<double> noise_without_massive_channels(const PairValues& in,
                                                     const std::vector<uint64_t>& dims) {
  if (dims.empty() || dims.back() < 2 || in.ref.empty()) return std::nullopt;
  const uint64_t channels = dims.back();
  std::vector<double> signal(channels, 0), noise(channels, 0);
  for (size_t k = 0; k < in.ref.size(); ++k) {
    const double r = in.ref[k], e = static_cast<double>(in.dev[k]) - r;
    if (!std::isfinite(r) || !std::isfinite(e)) continue;
    signal[k % channels] += r * r;
    noise[k % channels] += e * e;
  }
  std::vector<double> sorted = signal;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<ptrdiff_t>(channels / 2),
                   sorted.end());
  const double median = sorted[channels / 2];
  double kept_signal = 0, kept_noise = 0;
  bool massive = false;
  for (uint64_t c = 0; c < channels; ++c) {
    if (signal[c] > kMassiveChannel * median) {
      massive = true;
    } else {
      kept_signal += signal[c];
      kept_noise += noise[c];
    }
  }
  if (!massive || kept_signal <= 0) return std::nullopt;
  return kept_noise / kept_signal;
}

class Explainer {
 public:
  Explainer(const StoreReader& ref, const StoreReader& device, const RunComparison& run,
            RunAnalysis& analysis, std::span<const JudgedGroup> judged, const HintOptions& options)
      : ref_(ref),
        device_(device),
        run_(run),
        analysis_(analysis),
        judged_(judged),
        options_(options) {}

  void group(size_t g) {
    GroupFinding& finding = analysis_.groups[g];
    const PairResult* worst = worst_pair(finding);
    if (worst == nullptr) return;
    const std::string& tensor = worst->pair.ref->name;
    std::vector<Hint>& hints = finding.hints;
    if (has_flag(finding, Flag::kNonFiniteIntroduced)) non_finite(tensor, *worst->metrics, hints);
    if (has_flag(finding, Flag::kDegenerateEncoding)) degenerate(tensor, *worst, hints);
    if (has_flag(finding, Flag::kNonFiniteIntroduced)) {
      // NaN or Inf it made accounts for everything; its finite part's figures weigh nothing.
    } else if (input_non_finite(finding)) {
      // With NaN or Inf coming in, the finite part's SQNR says nothing about what the op added.
      inherited(g, tensor, {}, hints);
    } else {
      const Measured m = measure(g, *worst);
      causes(g, *worst, m, budget(g, *worst, m), hints);
    }
    order(hints, judged_[g].excess_verdict != Verdict::kPass);
  }

 private:
  // What measure() read of the group's worst pair (and its input) for the causes.
  struct Measured {
    bool read = false;                         // decoded (within the budget, with a layout)
    std::optional<LayoutTrial> layout;         // a reading that raises SQNR by layout_gain_db
    std::optional<EncodingEvidence> encoding;  // a quantized device output
    std::optional<double> gain_residual;       // gain_residual() against its worst input
    std::optional<double> unmasked_input;      // noise_without_massive_channels() of that input
  };

  Measured measure(size_t g, const PairResult& pair) const {
    Measured m;
    const std::optional<PairValues> values =
        read_pair(ref_, device_, pair, options_.element_budget);
    if (!values) return m;
    m.read = true;
    const std::vector<LayoutTrial> trials =
        try_layouts(values->ref, values->dev, pair.pair.ref->dims, reference_channel_axis(pair));
    if (!trials.empty() &&
        trials.front().sqnr_db - pair.metrics->sqnr_db >= options_.layout_gain_db) {
      m.layout = trials.front();
    }
    const TensorEntry& device = *pair.pair.device;
    if (device.quant.is_quantized() && saturation_range(device)) {
      m.encoding =
          examine_encoding(values->ref, values->dev, device, values->channel, judged_[g].pass_db);
    }
    const std::optional<Excess>& excess = judged_[g].excess;
    if (excess && excess->source == ExcessSource::kIsolated) return m;  // measured: no estimate
    if (const PairResult* input = worst_input(g)) {
      const std::optional<PairValues> in =
          read_pair(ref_, device_, *input, options_.element_budget);
      if (in) {
        m.unmasked_input = noise_without_massive_channels(*in, input->pair.ref->dims);
        if (input->pair.ref->dims == pair.pair.ref->dims) {
          m.gain_residual = is_softmax(analysis_.groups[g].op_type)
                                ? softmax_residual(*values, *in, pair.pair.ref->dims)
                                : gain_residual(*values, *in, pair.pair.ref->dims,
                                                options_.gain_channel_elements);
        }
      }
    }
    return m;
  }

  // What the group's inputs carry in: their relative noises added (as the judge's excess does).
  double carried_noise(const GroupFinding& finding) const {
    double noise = 0;
    bool any = false;
    for (size_t i : finding.inputs) {
      if (!analysis_.groups[i].sqnr_db) continue;
      noise += relative_noise(*analysis_.groups[i].sqnr_db);
      any = true;
    }
    if (any) return noise;
    return finding.input_sqnr_db ? relative_noise(*finding.input_sqnr_db) : 0;
  }

  // The worst compared output of the group's inputs: the error it carries in.
  const PairResult* worst_input(size_t g) const {
    const PairResult* worst = nullptr;
    for (size_t i : analysis_.groups[g].inputs) {
      const PairResult* input = worst_pair(analysis_.groups[i]);
      if (input != nullptr &&
          (worst == nullptr || input->metrics->sqnr_db < worst->metrics->sqnr_db)) {
        worst = input;
      }
    }
    return worst;
  }

  NoiseBudget budget(size_t g, const PairResult& pair, const Measured& m) const {
    const GroupFinding& finding = analysis_.groups[g];
    NoiseBudget b;
    b.total = relative_noise(pair.metrics->sqnr_db);
    b.input = carried_noise(finding);
    const std::optional<double> ideal =
        m.encoding ? std::optional(m.encoding->ideal_sqnr_db) : pair.metrics->ideal_sqnr_db;
    if (ideal) {
      b.quantized = true;
      b.rounding = relative_noise(*ideal);
    }
    const std::optional<Excess>& excess = judged_[g].excess;
    if (excess && excess->source == ExcessSource::kIsolated) {
      b.own = std::pow(10.0, excess->added_noise_db / 10);
      b.input = std::max(b.input, b.total - b.rounding - b.own);
      return b;
    }
    b.own = std::max(0.0, b.total - b.input - b.rounding);
    if (excess && excess->source == ExcessSource::kKernel) {
      b.own = std::pow(10.0, excess->added_noise_db / 10);
    }
    // What the op adds once its input's error may reach it reshaped: through a fitted gain, or
    // weighed as if no channel were massive.
    std::optional<double> own;
    if (m.gain_residual) own = std::max(0.0, *m.gain_residual - b.rounding);
    if (m.unmasked_input) {
      const double unmasked = std::max(0.0, b.total - *m.unmasked_input - b.rounding);
      own = std::min(own.value_or(unmasked), unmasked);
    }
    if (own && *own < b.own) {
      const double carried = b.input;
      b.own = *own;
      b.own_remeasured = true;
      b.input = std::max(b.input, b.total - b.rounding - *own);
      // Said when it matters: the gain at least doubles what the inputs' SQNR carries in.
      b.through_gain = b.input >= 2 * carried;
    }
    return b;
  }

  // The causes of a group's error, each offered only for the share of the loss it accounts for.
  void causes(size_t g, const PairResult& pair, const Measured& m, const NoiseBudget& b,
              std::vector<Hint>& hints) const {
    const GroupFinding& finding = analysis_.groups[g];
    const std::string& tensor = pair.pair.ref->name;
    const double sqnr = pair.metrics->sqnr_db;
    if (m.layout) layout(tensor, sqnr, *m.layout, hints);
    const bool own_judged = judged_[g].excess_verdict != Verdict::kPass && !b.own_remeasured;
    const double own_explains = explained_by(b, b.own, b.input + b.rounding);
    if (!m.layout && b.own > 0 && (own_judged || own_explains >= options_.kernel_gap_db)) {
      kernel(g, tensor, sqnr, b, own_explains, hints);
    }
    if (m.encoding) encoding_hints(*m.encoding, tensor, sqnr, *pair.pair.device, g, b, hints);
    const bool bad_input = input_is_bad(finding);
    const double introduced = finding.introduced_db.value_or(kUnbounded);
    const bool input_largest = b.input > 0 && b.input >= std::max(b.own, b.rounding);
    if (!m.layout && (input_largest || (bad_input && introduced < options_.inherited_below_db) ||
                      (bad_input && hints.empty() && introduced < options_.kernel_gap_db))) {
      inherited(g, tensor, b, hints);
    }
    // Every failing or warning group gets a cause: the best account of what was measured.
    if (hints.empty()) fallback(g, m, tensor, sqnr, b, hints);
  }

  // By what each cause accounts for; the op's own error first when the excess rule judged it (the
  // cause of the verdict), after the causes that account for everything (NaN, a broken encoding).
  static void order(std::vector<Hint>& hints, bool own_error_first) {
    std::stable_sort(hints.begin(), hints.end(),
                     [](const Hint& a, const Hint& b) { return a.explained_db > b.explained_db; });
    if (!own_error_first) return;
    const auto own = std::find_if(hints.begin(), hints.end(), [](const Hint& h) {
      return h.kind() == HintKind::kKernelSuspect;
    });
    const auto first_finite = std::find_if(
        hints.begin(), hints.end(), [](const Hint& h) { return std::isfinite(h.explained_db); });
    if (own != hints.end() && first_finite < own) std::rotate(first_finite, own, own + 1);
  }

  // The input of `finding` that carries the most error: NaN or Inf first, else the lowest SQNR.
  const GroupFinding* worst_input_finding(const GroupFinding& finding) const {
    const GroupFinding* worst = nullptr;
    for (size_t i : finding.inputs) {
      const GroupFinding& input = analysis_.groups[i];
      if (input.non_finite && (worst == nullptr || !worst->non_finite)) {
        worst = &input;  // NaN or Inf outweighs any SQNR
      } else if (input.sqnr_db && (worst == nullptr || (!worst->non_finite && worst->sqnr_db &&
                                                        *input.sqnr_db < *worst->sqnr_db))) {
        worst = &input;
      }
    }
    return worst;
  }

  // Whether a group only passed its input's error on: it passes and has no cause of its own
  // (an attention's scores between a broken key and the softmax that shows it).
  bool passes_error_on(const GroupFinding& finding) const {
    const size_t index = static_cast<size_t>(&finding - analysis_.groups.data());
    return finding.hints.empty() && !finding.non_finite && judged_[index].verdict == Verdict::kPass;
  }

  // The group that introduced the error `finding` inherits: its worst input, or where that input
  // got it from (groups are explained in op order, so an input's hints are known), through the
  // inputs that only passed it on.
  std::optional<std::string> upstream_source(const GroupFinding& finding) const {
    const GroupFinding* worst = worst_input_finding(finding);
    if (worst == nullptr) {  // no input was compared: the first that fails or warns
      for (size_t i : finding.inputs) {
        if (judged_[i].verdict != Verdict::kPass) {
          return run_.alignment.groups[analysis_.groups[i].group].id;
        }
      }
      return std::nullopt;
    }
    // Up through inputs that passed on as much error (within inherited_below_db of what reached
    // this op): where the error was already as large is where it came from.
    const std::optional<double> carried = worst->sqnr_db;
    for (size_t steps = 0; carried && steps < analysis_.groups.size() && passes_error_on(*worst);
         ++steps) {
      const GroupFinding* further = worst_input_finding(*worst);
      if (further == nullptr || further->non_finite || !further->sqnr_db ||
          *further->sqnr_db >= *carried + options_.inherited_below_db) {
        break;
      }
      worst = further;
    }
    // Where the input's own first cause says its error came from, else the input itself.
    if (!worst->hints.empty()) {
      if (const auto* inherited = std::get_if<Inherited>(&worst->hints.front().evidence)) {
        return inherited->upstream_group;
      }
    }
    return run_.alignment.groups[worst->group].id;
  }

  bool input_is_bad(const GroupFinding& finding) const {
    return std::any_of(finding.inputs.begin(), finding.inputs.end(),
                       [&](size_t i) { return judged_[i].verdict != Verdict::kPass; });
  }

  // NaN or Inf in an input: the op's error is its inputs', whatever SQNR its finite part has.
  bool input_non_finite(const GroupFinding& finding) const {
    return std::any_of(finding.inputs.begin(), finding.inputs.end(),
                       [&](size_t i) { return analysis_.groups[i].non_finite; });
  }

  static bool has_flag(const GroupFinding& f, Flag flag) {
    return std::find(f.flags.begin(), f.flags.end(), flag) != f.flags.end();
  }

  const PairResult* worst_pair(const GroupFinding& finding) const {
    const PairResult* worst = nullptr;
    for (size_t p : finding.pairs) {
      const PairResult& pair = run_.pairs[p];
      // A pair with no evidence has no figure to explain (the no_evidence flag says why).
      if (pair.metrics && !no_evidence(*pair.metrics) &&
          (worst == nullptr || pair.metrics->sqnr_db < worst->metrics->sqnr_db)) {
        worst = &pair;
      }
    }
    return worst;
  }

  static void non_finite(const std::string& tensor, const Metrics& m, std::vector<Hint>& hints) {
    NanInfIntroduced e{m.dev_nan, m.dev_inf, m.ref_nan, m.ref_inf};
    hints.push_back({tensor, kUnbounded,
                     fmt::format("the device output holds {} NaN and {} Inf where the reference "
                                 "holds {} and {}, and its inputs held none",
                                 e.device_nan, e.device_inf, e.reference_nan, e.reference_inf),
                     e});
  }

  static void degenerate(const std::string& tensor, const PairResult& pair,
                         std::vector<Hint>& hints) {
    std::vector<EncodingFinding> findings = lint_encoding(*pair.pair.device);
    if (findings.empty()) findings = lint_encoding(*pair.pair.ref);
    if (findings.empty()) return;
    const std::string what = describe(findings.front());
    hints.push_back(
        {tensor, kUnbounded, "the encoding cannot be right: " + what, DegenerateEncoding{what}});
  }

  static void layout(const std::string& tensor, double sqnr, const LayoutTrial& best,
                     std::vector<Hint>& hints) {
    hints.push_back({tensor, capped(best.sqnr_db) - sqnr,
                     fmt::format("a layout mix-up ({}): read the other way, the device output "
                                 "reaches {:.1f} dB instead of {:.1f} dB",
                                 best.permutation, best.sqnr_db, sqnr),
                     LayoutSuspect{best.permutation, best.sqnr_db}});
  }

  // `budget` unset: NaN or Inf came in.
  void inherited(size_t g, const std::string& tensor, const std::optional<NoiseBudget>& budget,
                 std::vector<Hint>& hints) const {
    const GroupFinding& finding = analysis_.groups[g];
    const std::optional<std::string> source = upstream_source(finding);
    if (!source) return;
    if (!budget) {
      hints.push_back({tensor, kUnbounded,
                       fmt::format("its input holds NaN or Inf from upstream: the error comes "
                                   "from group {}",
                                   *source),
                       Inherited{*source, std::numeric_limits<double>::quiet_NaN()}});
      return;
    }
    const NoiseBudget& b = *budget;
    const double input = finding.input_sqnr_db.value_or(kExactSqnrDb);
    const double introduced = finding.introduced_db.value_or(0);
    const std::string how = b.through_gain ? " (reshaped by the op's own gain, which weighs its "
                                             "channels differently from the input's SQNR)"
                                           : "";
    hints.push_back(
        {tensor, explained_by(b, b.input, b.rounding + b.own),
         fmt::format("its input was already wrong (SQNR {:.1f} dB) and this op added {:.2f} dB: "
                     "the error comes from group {} upstream{}",
                     input, introduced, *source, how),
         Inherited{*source, introduced}});
  }

  // The op's own error accounts for the loss: its kernel (or the runtime around it) computes
  // something else than its encoding and inputs allow.
  void kernel(size_t g, const std::string& tensor, double sqnr, const NoiseBudget& b,
              double explained, std::vector<Hint>& hints) const {
    const double allowed =
        -10 * std::log10(std::max(b.input + b.rounding, relative_noise(kExactSqnrDb)));
    const double ideal = b.quantized ? -10 * std::log10(b.rounding) : kExactSqnrDb;
    const std::optional<Excess>& excess = judged_[g].excess;
    const std::string source = excess ? std::string(how_measured(excess->source)) : "";
    const std::string allows =
        b.quantized
            ? fmt::format(
                  "its inputs and its encoding allow {:.1f} dB (the encoding alone "
                  "{:.1f} dB), but the output reaches {:.1f} dB: the op adds {:.3g} "
                  "times its encoding's rounding noise{}",
                  allowed, capped(ideal), sqnr, rms_ratio(b.own, b.rounding), source)
            : fmt::format(
                  "the device output has no encoding to limit it{}, but it reaches "
                  "{:.1f} dB",
                  b.input > 0 ? fmt::format(", and its input reaches {:.1f} dB", allowed) : "",
                  sqnr);
    hints.push_back({tensor, explained,
                     allows + ", and no layout or range accounts for it: the op computes "
                              "something else",
                     KernelSuspect{capped(ideal)}});
  }

  // The cause of a failing or warning group no rule above explains (docs/metrics.md, 6b): the
  // encoding's own resolution when its rounding is the largest share or cannot reach the
  // policy's pass line; else its inputs' error when that is more than the rounding; else the op
  // itself, with the figures it has (its values may not have been read, or it loses less than
  // kernel_gap_db).
  void fallback(size_t g, const Measured& m, const std::string& tensor, double sqnr,
                const NoiseBudget& b, std::vector<Hint>& hints) const {
    const double pass_db = judged_[g].pass_db;
    const double ideal = b.quantized ? capped(-10 * std::log10(b.rounding)) : kExactSqnrDb;
    if (m.encoding && (ideal < pass_db || b.rounding >= std::max(b.own, b.input))) {
      const EncodingEvidence& ev = *m.encoding;
      const double best =
          ev.wider ? std::max(ev.fitted_sqnr_db, ev.wider->sqnr_db) : ev.fitted_sqnr_db;
      hints.push_back(
          {tensor, explained_by_fix(b, best),
           fmt::format("the device's own encoding allows only {:.1f} dB{}, and the output reaches "
                       "{:.1f} dB: its steps are too coarse for this tensor; one fitted to "
                       "[{:.6g}, {:.6g}] would allow {:.1f} dB{}",
                       ideal,
                       ideal < pass_db ? fmt::format(", below the policy's {:.1f} dB", pass_db)
                                       : std::string(),
                       sqnr, ev.fitted.min, ev.fitted.max, ev.fitted_sqnr_db,
                       wider_text(ev, pass_db)),
           CoarseEncoding{ev.range_fraction, ev.fitted_sqnr_db, ev.fitted, ev.wider}});
      return;
    }
    // An op that adds less than would point at its kernel, behind inputs that carry more than its
    // rounding: the chain's error, which its gain may have raised.
    if (b.input > b.rounding) {
      inherited(g, tensor, b, hints);
      if (!hints.empty()) return;
    }
    const double input_sqnr = analysis_.groups[g].input_sqnr_db.value_or(kUnbounded);
    const double loss = std::min(ideal, capped(input_sqnr)) - sqnr;
    std::string where = b.quantized ? fmt::format(" where its encoding allows {:.1f} dB", ideal)
                        : m.read    ? std::string(" with no encoding")
                                    : std::string();
    if (input_sqnr < kExactSqnrDb) where += fmt::format(" and its input {:.1f} dB", input_sqnr);
    const std::string why =
        m.read ? fmt::format(
                     "less than the {:.0f} dB that would point at its kernel, and no "
                     "layout, range or upstream error accounts for it",
                     options_.kernel_gap_db)
               : fmt::format(
                     "and its values were not read (more than {} elements a side, or no "
                     "layout), so no layout, range or kernel measurement says why",
                     options_.element_budget);
    hints.push_back(
        {tensor, std::min(std::max(0.0, loss), explained_by(b, b.own, b.input + b.rounding)),
         fmt::format("the output reaches {:.1f} dB{}: the op itself loses {:.1f} dB, {}", sqnr,
                     where, loss, why),
         KernelSuspect{ideal}});
  }

  // "; below the policy's 20 dB even so: 16 bits over that range would allow 61.3 dB"
  static std::string wider_text(const EncodingEvidence& ev, double pass_db) {
    if (!ev.wider) return "";
    return fmt::format(
        "; below the policy's {:.1f} dB even so: {} bits over that range would "
        "allow {:.1f} dB",
        pass_db, ev.wider->encoding.bitwidth, ev.wider->sqnr_db);
  }

  // A range that clips the reference, or one far wider than it: offered with what fixing it
  // would gain of the loss seen, so a poor encoding behind a larger own error comes second.
  void encoding_hints(const EncodingEvidence& ev, const std::string& tensor, double sqnr,
                      const TensorEntry& device, size_t g, const NoiseBudget& b,
                      std::vector<Hint>& hints) const {
    const double pass_db = judged_[g].pass_db;
    const auto [lo, hi] = real_range(device, 0);
    const double clipped = ev.below_fraction + ev.above_fraction;
    if (clipped >= options_.clipped_fraction &&
        ev.sqnr_without_clipped_db - sqnr >= options_.clipping_gain_db) {
      hints.push_back(
          {tensor, explained_by_fix(b, ev.fitted_sqnr_db),
           fmt::format("{} of the reference lies outside the encoding's range [{:.6g}, {:.6g}] "
                       "({} below, {} above); without those elements SQNR is {:.1f} dB, and an "
                       "encoding over [{:.6g}, {:.6g}] would allow {:.1f} dB{}",
                       percent(clipped), lo, hi, percent(ev.below_fraction),
                       percent(ev.above_fraction), ev.sqnr_without_clipped_db, ev.fitted.min,
                       ev.fitted.max, ev.fitted_sqnr_db, wider_text(ev, pass_db)),
           Clipping{ev.below_fraction, ev.above_fraction, ev.sqnr_without_clipped_db, ev.fitted,
                    ev.fitted_sqnr_db, ev.wider}});
    }
    if (ev.range_fraction <= options_.coarse_range_fraction &&
        ev.fitted_sqnr_db - ev.ideal_sqnr_db >= options_.coarse_gain_db) {
      hints.push_back(
          {tensor, explained_by_fix(b, ev.fitted_sqnr_db),
           fmt::format("the reference spans {} of the encoding's range [{:.6g}, {:.6g}]: the "
                       "encoding allows {:.1f} dB, one fitted to [{:.6g}, {:.6g}] would allow "
                       "{:.1f} dB{}",
                       percent(ev.range_fraction), lo, hi, ev.ideal_sqnr_db, ev.fitted.min,
                       ev.fitted.max, ev.fitted_sqnr_db, wider_text(ev, pass_db)),
           CoarseEncoding{ev.range_fraction, ev.fitted_sqnr_db, ev.fitted, ev.wider}});
    }
  }

  const StoreReader& ref_;
  const StoreReader& device_;
  const RunComparison& run_;
  RunAnalysis& analysis_;
  std::span<const JudgedGroup> judged_;  // by analysis group
  const HintOptions& options_;
};

}  // namespace

void explain(const StoreReader& ref, const StoreReader& device, const RunComparison& run,
             RunAnalysis& analysis, std::span<const JudgedGroup> judged,
             const HintOptions& options) {
  if (judged.size() != analysis.groups.size()) return;  // judged for another analysis
  Explainer explainer(ref, device, run, analysis, judged, options);
  for (size_t g = 0; g < analysis.groups.size(); ++g) {
    if (judged[g].verdict != Verdict::kPass) explainer.group(g);
  }
}

}  // namespace qd::compare
