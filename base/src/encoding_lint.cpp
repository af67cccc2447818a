#include "qnn_debug/base/encoding_lint.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>

namespace qd {
namespace {

// The raw integers an encoding can take: the dtype's range narrowed to the bitwidth.
struct RawSpan {
  double min = 0;
  double max = 0;
};

std::optional<RawSpan> raw_span(const TensorRecord& record) {
  const DTypeInfo dtype = info(record.dtype);
  if (dtype.kind != DTypeKind::kSignedInt && dtype.kind != DTypeKind::kUnsignedInt) {
    return std::nullopt;
  }
  const unsigned bits = record.quant.bitwidth > 0 && record.quant.bitwidth < dtype.bits
                            ? record.quant.bitwidth
                            : dtype.bits;
  const double span = std::ldexp(1.0, static_cast<int>(bits));
  if (dtype.kind == DTypeKind::kUnsignedInt) return RawSpan{0, span - 1};
  return RawSpan{-span / 2, span / 2 - 1};
}

std::optional<EncodingProblem> channel_problem(const Quantization& quant, size_t channel,
                                               const RawSpan& raw) {
  const double scale = quant.scales[channel];
  if (!std::isfinite(scale)) return EncodingProblem::kScaleNotFinite;
  if (scale <= 0) return EncodingProblem::kScaleNotPositive;
  const double low = std::fabs(quant.dequantize(raw.min, channel));
  const double high = std::fabs(quant.dequantize(raw.max, channel));
  if (!(std::max(low, high) <= kMaxEncodedMagnitude)) return EncodingProblem::kRangeOverflow;
  if ((raw.max - raw.min) * scale < kMinEncodedRange) return EncodingProblem::kRangeCollapsed;
  return std::nullopt;
}

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

std::vector<EncodingFinding> lint_encoding(const TensorRecord& record) {
  if (!record.quant.is_quantized()) {
    if (info(record.dtype).fixed_point) return {{EncodingProblem::kMissing, 0, 0, 0}};
    return {};
  }
  const std::optional<RawSpan> raw = raw_span(record);
  if (!raw) return {};  // a float or bool dtype cannot be quantized (the store refuses it)
  constexpr size_t kKinds = 5;
  std::array<EncodingFinding, kKinds> found{};
  for (size_t c = 0; c < record.quant.scales.size(); ++c) {
    const std::optional<EncodingProblem> problem = channel_problem(record.quant, c, *raw);
    if (!problem) continue;
    EncodingFinding& slot = found[static_cast<size_t>(*problem)];
    if (slot.channels++ == 0) {
      slot.problem = *problem;
      slot.channel = c;
      slot.scale = record.quant.scales[c];
    }
  }
  std::vector<EncodingFinding> findings;
  for (const EncodingFinding& finding : found) {
    if (finding.channels > 0) findings.push_back(finding);
  }
  return findings;
}

std::string describe(const EncodingFinding& finding) {
  std::string text(encoding_problem_name(finding.problem));
  if (finding.problem == EncodingProblem::kMissing) {
    return text + " (a fixed-point dtype with no scale and offset: pass the encodings)";
  }
  text += " (scale " + format_number(finding.scale);
  if (finding.channels > 1 || finding.channel > 0) {
    text += " in " + std::to_string(finding.channels) + " channel" +
            (finding.channels == 1 ? "" : "s") + ", first channel " +
            std::to_string(finding.channel);
  }
  return text + ")";
}

}  // namespace qd
