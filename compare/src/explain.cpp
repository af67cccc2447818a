#include "qnn_debug/compare/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/layout.h"

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

std::vector<LayoutTrial> try_layouts(std::span<const float> ref, std::span<const float> dev,
                                     const std::vector<uint64_t>& dims, int channel_axis) {
  std::vector<LayoutTrial> trials;
  for (const Misreading& m : misreadings(dims)) {
    Result<std::vector<float>> values = reread(dev, LayoutPlan{m.order, false, false}, m.read_dims);
    if (values.is_ok()) trials.push_back({m.name, sqnr_db(ref, *values)});
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
    trials.push_back({"channels reversed (axis " + std::to_string(axis) + ")",
                      sqnr_db(ref, reversed_along(dev, dims, axis))});
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
  return values;
}

// The channel axis in the reference's layout: the device encoding's, mapped back; -1 for none.
int reference_channel_axis(const PairResult& pair) {
  if (!pair.pair.device->quant.per_axis()) return -1;
  const std::optional<uint32_t> axis =
      channel_view(*pair.pair.ref, *pair.pair.device, *pair.layout).axis;
  return axis ? static_cast<int>(*axis) : -1;
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
    const double sqnr = worst->metrics->sqnr_db;
    std::vector<Hint>& hints = finding.hints;
    if (has_flag(finding, Flag::kNonFiniteIntroduced)) non_finite(tensor, *worst->metrics, hints);
    if (has_flag(finding, Flag::kDegenerateEncoding)) degenerate(tensor, *worst, hints);
    const bool bad_input = input_is_bad(finding);
    const double introduced = finding.introduced_db.value_or(kUnbounded);
    const bool inherits =
        (bad_input && introduced < options_.inherited_below_db) || input_non_finite(finding);
    const double input_sqnr = finding.input_sqnr_db.value_or(kUnbounded);
    const double pass_db = judged_[g].pass_db;
    const Measured m = measured(*worst, tensor, sqnr, input_sqnr, inherits, pass_db, hints);
    // Input error is also the best account of an op that added less than a kernel fault would
    // and has no other cause.
    if (inherits || (bad_input && hints.empty() && introduced < options_.kernel_gap_db)) {
      inherited(g, tensor, input_non_finite(finding), hints);
    }
    // Every failing or warning group gets a cause: the best account of what was measured.
    if (hints.empty()) fallback(m, tensor, sqnr, input_sqnr, pass_db, hints);
    std::stable_sort(hints.begin(), hints.end(),
                     [](const Hint& a, const Hint& b) { return a.explained_db > b.explained_db; });
  }

 private:
  // The group that introduced the error `finding` inherits: its worst input, or where that input
  // got it from (groups are explained in op order, so an input's hints are known).
  std::optional<std::string> upstream_source(const GroupFinding& finding) const {
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
    if (worst == nullptr) {  // no input was compared: the first that fails or warns
      for (size_t i : finding.inputs) {
        if (judged_[i].verdict != Verdict::kPass) {
          return run_.alignment.groups[analysis_.groups[i].group].id;
        }
      }
      return std::nullopt;
    }
    for (const Hint& hint : worst->hints) {
      if (const auto* inherited = std::get_if<Inherited>(&hint.evidence)) {
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

  void inherited(size_t g, const std::string& tensor, bool non_finite_input,
                 std::vector<Hint>& hints) const {
    const GroupFinding& finding = analysis_.groups[g];
    const std::optional<std::string> source = upstream_source(finding);
    if (!source) return;
    const std::string& upstream = *source;
    const double input = finding.input_sqnr_db.value_or(kExactSqnrDb);
    // With NaN or Inf coming in, the finite part's SQNR says nothing about what the op added.
    const double introduced = non_finite_input ? std::numeric_limits<double>::quiet_NaN()
                                               : finding.introduced_db.value_or(0);
    const std::string sentence =
        non_finite_input
            ? fmt::format("its input holds NaN or Inf from upstream: the error comes from group {}",
                          upstream)
            : fmt::format(
                  "its input was already wrong (SQNR {:.1f} dB) and this op added {:.2f} "
                  "dB: the error comes from group {} upstream",
                  input, introduced, upstream);
    hints.push_back({tensor, non_finite_input ? kUnbounded : capped(kExactSqnrDb) - capped(input),
                     sentence, Inherited{upstream, introduced}});
  }

  // What measured() found out about the pair, for the fallback.
  struct Measured {
    bool read = false;            // the values were decoded (within the budget, with a layout)
    bool quantized = false;       // the device tensor has an encoding the measurements could use
    double ideal = kExactSqnrDb;  // what that encoding allows (capped)
    std::optional<EncodingEvidence> encoding;
  };

  // The hints that need the values: a layout, the encoding's range, the kernel itself.
  Measured measured(const PairResult& pair, const std::string& tensor, double sqnr,
                    double input_sqnr, bool inherits, double pass_db,
                    std::vector<Hint>& hints) const {
    Measured m;
    const std::optional<PairValues> values =
        read_pair(ref_, device_, pair, options_.element_budget);
    if (!values) return m;
    m.read = true;
    bool explained = inherits;
    const std::vector<LayoutTrial> trials =
        try_layouts(values->ref, values->dev, pair.pair.ref->dims, reference_channel_axis(pair));
    if (!trials.empty() && trials.front().sqnr_db - sqnr >= options_.layout_gain_db) {
      const LayoutTrial& best = trials.front();
      hints.push_back({tensor, capped(best.sqnr_db) - sqnr,
                       fmt::format("a layout mix-up ({}): read the other way, the device output "
                                   "reaches {:.1f} dB instead of {:.1f} dB",
                                   best.permutation, best.sqnr_db, sqnr),
                       LayoutSuspect{best.permutation, best.sqnr_db}});
      explained = true;
    }
    const TensorEntry& device = *pair.pair.device;
    double ideal = kExactSqnrDb;
    if (device.quant.is_quantized() && saturation_range(device)) {
      const EncodingEvidence ev =
          examine_encoding(values->ref, values->dev, device, values->channel, pass_db);
      ideal = capped(ev.ideal_sqnr_db);
      m.quantized = true;
      m.ideal = ideal;
      m.encoding = ev;
      explained = encoding_hints(ev, tensor, sqnr, device, pass_db, hints) || explained;
    }
    // What the op could have reached: its encoding's ideal, and no better than its input.
    const double reachable = std::min(ideal, capped(input_sqnr));
    if (!explained && reachable - sqnr >= options_.kernel_gap_db) {
      // A float output has no encoding to allow less: only its input bounds it.
      const std::string allows =
          m.quantized
              ? fmt::format("the device's own encoding allows {:.1f} dB{}", ideal,
                            input_sqnr < kExactSqnrDb
                                ? fmt::format(" and its input {:.1f} dB", input_sqnr)
                                : "")
              : fmt::format("the device output has no encoding to limit it{}",
                            input_sqnr < kExactSqnrDb
                                ? fmt::format(", and its input reaches {:.1f} dB", input_sqnr)
                                : "");
      hints.push_back({tensor, reachable - sqnr,
                       fmt::format("{}, but the output reaches {:.1f} dB, and no layout or range "
                                   "accounts for it: the op computes something else",
                                   allows, sqnr),
                       KernelSuspect{ideal}});
    }
    return m;
  }

  // The cause of a failing or warning group no rule above explains (docs/metrics.md, 6b): the
  // encoding's own resolution when it cannot reach the policy's pass line, else the op itself,
  // with the figures it has (it loses less than kernel_gap_db, or its values were not read).
  void fallback(const Measured& m, const std::string& tensor, double sqnr, double input_sqnr,
                double pass_db, std::vector<Hint>& hints) const {
    if (m.encoding && m.ideal < pass_db) {
      const EncodingEvidence& ev = *m.encoding;
      const double best =
          ev.wider ? std::max(ev.fitted_sqnr_db, ev.wider->sqnr_db) : ev.fitted_sqnr_db;
      hints.push_back(
          {tensor, std::max(0.0, capped(best) - sqnr),
           fmt::format("the device's own encoding allows only {:.1f} dB, below the policy's "
                       "{:.1f} dB, and the output reaches {:.1f} dB: its steps are too coarse "
                       "for this tensor; one fitted to [{:.6g}, {:.6g}] would allow {:.1f} dB{}",
                       m.ideal, pass_db, sqnr, ev.fitted.min, ev.fitted.max, ev.fitted_sqnr_db,
                       wider_text(ev, pass_db)),
           CoarseEncoding{ev.range_fraction, ev.fitted_sqnr_db, ev.fitted, ev.wider}});
      return;
    }
    const double reachable = std::min(m.ideal, capped(input_sqnr));
    const double loss = reachable - sqnr;
    std::string where = m.quantized ? fmt::format(" where its encoding allows {:.1f} dB", m.ideal)
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
        {tensor, std::max(0.0, loss),
         fmt::format("the output reaches {:.1f} dB{}: the op itself loses {:.1f} dB, {}", sqnr,
                     where, loss, why),
         KernelSuspect{m.ideal}});
  }

  // "; below the policy's 20 dB even so: 16 bits over that range would allow 61.3 dB"
  static std::string wider_text(const EncodingEvidence& ev, double pass_db) {
    if (!ev.wider) return "";
    return fmt::format(
        "; below the policy's {:.1f} dB even so: {} bits over that range would "
        "allow {:.1f} dB",
        pass_db, ev.wider->encoding.bitwidth, ev.wider->sqnr_db);
  }

  bool encoding_hints(const EncodingEvidence& ev, const std::string& tensor, double sqnr,
                      const TensorEntry& device, double pass_db, std::vector<Hint>& hints) const {
    bool any = false;
    const auto [lo, hi] = real_range(device, 0);
    const double clipped = ev.below_fraction + ev.above_fraction;
    if (clipped >= options_.clipped_fraction &&
        ev.sqnr_without_clipped_db - sqnr >= options_.clipping_gain_db) {
      hints.push_back(
          {tensor, capped(ev.sqnr_without_clipped_db) - sqnr,
           fmt::format("{} of the reference lies outside the encoding's range [{:.6g}, {:.6g}] "
                       "({} below, {} above); without those elements SQNR is {:.1f} dB, and an "
                       "encoding over [{:.6g}, {:.6g}] would allow {:.1f} dB{}",
                       percent(clipped), lo, hi, percent(ev.below_fraction),
                       percent(ev.above_fraction), ev.sqnr_without_clipped_db, ev.fitted.min,
                       ev.fitted.max, ev.fitted_sqnr_db, wider_text(ev, pass_db)),
           Clipping{ev.below_fraction, ev.above_fraction, ev.sqnr_without_clipped_db, ev.fitted,
                    ev.fitted_sqnr_db, ev.wider}});
      any = true;
    }
    if (ev.range_fraction <= options_.coarse_range_fraction &&
        ev.fitted_sqnr_db - ev.ideal_sqnr_db >= options_.coarse_gain_db) {
      hints.push_back(
          {tensor, capped(ev.fitted_sqnr_db) - sqnr,
           fmt::format("the reference spans {} of the encoding's range [{:.6g}, {:.6g}]: the "
                       "encoding allows {:.1f} dB, one fitted to [{:.6g}, {:.6g}] would allow "
                       "{:.1f} dB{}",
                       percent(ev.range_fraction), lo, hi, ev.ideal_sqnr_db, ev.fitted.min,
                       ev.fitted.max, ev.fitted_sqnr_db, wider_text(ev, pass_db)),
           CoarseEncoding{ev.range_fraction, ev.fitted_sqnr_db, ev.fitted, ev.wider}});
      any = true;
    }
    return any;
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
