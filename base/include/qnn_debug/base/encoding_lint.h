// Which quantization encodings cannot mean anything for their dtype. One rule set, used by the
// importers (to flag what they read), `qnn-debug inspect` and `qnn-debug diff` (a flagged device
// encoding fails its group). docs/metrics.md ("Encoding lint") gives the exact bounds.
//
// Real converter files carry encodings that were never calibrated (min/max of +-1e38, scales of
// ~1e36) and sometimes zero or negative scales; stores keep them as written, and this names
// them. The bounds look at the real range the encoding can express for its dtype and bitwidth,
// so an INT_32 bias scale of 1e-14 (a range of 4e-5) is normal while an 8-bit one is not.
#pragma once

#include "qnn_debug/base/vocabulary.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/tensor.h"

namespace qd {

enum class EncodingProblem : uint8_t {
  kMissing,         // a FIXED_POINT dtype with no encoding: the raw integers mean nothing alone
  kScaleNotFinite,  // NaN or infinite scale
  kScaleNotPositive,
  kRangeOverflow,   // some encodable value has a magnitude above kMaxEncodedMagnitude
  kRangeCollapsed,  // the whole encodable range is narrower than kMinEncodedRange
};

// Real values no tensor of a working network reaches; an uncalibrated encoding reaches them.
inline constexpr double kMaxEncodedMagnitude = 1e30;
// Below this, (2^bits - 1) steps cover no meaningful span of real values.
inline constexpr double kMinEncodedRange = 1e-8;

// "missing_encoding", "scale_not_finite", "scale_not_positive", "range_overflow",
// "range_collapsed": the names reports and `inspect --json` use.
inline constexpr auto kEncodingProblems = std::to_array<Term<EncodingProblem>>({
    {EncodingProblem::kMissing, "missing_encoding", "a fixed-point tensor with no encoding"},
    {EncodingProblem::kScaleNotFinite, "scale_not_finite", "a NaN or infinite scale"},
    {EncodingProblem::kScaleNotPositive, "scale_not_positive", "a zero or negative scale"},
    {EncodingProblem::kRangeOverflow, "range_overflow",
     "encodable values beyond any working network's"},
    {EncodingProblem::kRangeCollapsed, "range_collapsed",
     "an encodable range too narrow to hold a signal"},
});
static_assert(in_declaration_order(kEncodingProblems));
constexpr std::string_view encoding_problem_name(EncodingProblem problem) {
  return term_name(kEncodingProblems, problem);
}

struct EncodingFinding {
  EncodingProblem problem = EncodingProblem::kMissing;
  size_t channel = 0;   // the first channel with this problem (0 for per-tensor)
  size_t channels = 0;  // how many channels have it (0 for kMissing)
  double scale = 0;     // that channel's scale
};

// Every problem of `record`'s encoding, at most one finding per problem kind, in enum order.
// Empty for a sound encoding and for tensors that need none (float, bool, plain integers).
std::vector<EncodingFinding> lint_encoding(const TensorRecord& record);

// One line for people: "scale_not_positive (scale 0 in 3 of 64 channels, first channel 5)".
std::string describe(const EncodingFinding& finding);

}  // namespace qd
