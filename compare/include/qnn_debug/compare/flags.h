// The cause flags a group of a report can carry: each declared once, in kFlags, with its name in
// reports and what it says. The JSON, the CSV, the terminal and the schema's "flags" enum follow
// the table (FlagTable.IsTheSchemasEnum holds docs/report-schema.json to it).
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "qnn_debug/base/vocabulary.h"

namespace qd::compare {

enum class Flag {
  kSaturation,           // more raw values than AnalysisOptions allows sit at an end of the range
  kDegenerateEncoding,   // an encoding no value can be trusted through (base/encoding_lint.h)
  kNonFiniteIntroduced,  // NaN/Inf on the device that no input carried
  kLayoutInferred,       // the device layout was guessed, not recorded
  kNotCompared,          // an output could not be compared (shape mismatch, damaged data)
  kNoEvidence,           // an output with no element finite on both sides: it fails
  kNearZeroReference,    // an output whose reference is below 0.1 step of the device encoding
};

using FlagInfo = Term<Flag>;

inline constexpr auto kFlags = std::to_array<FlagInfo>({
    {Flag::kSaturation, "saturation", "many device values clipped at an end of the encoding"},
    {Flag::kDegenerateEncoding, "degenerate_encoding",
     "an encoding no value can be trusted through (encoding lint)"},
    {Flag::kNonFiniteIntroduced, "nan_inf_introduced", "NaN or Inf that no input carried"},
    {Flag::kLayoutInferred, "layout_inferred", "the device layout was inferred, not recorded"},
    {Flag::kNotCompared, "not_compared", "an output could not be compared"},
    {Flag::kNoEvidence, "no_evidence", "an output with no element finite on both sides"},
    {Flag::kNearZeroReference, "near_zero_reference",
     "an output whose reference RMS is below 0.1 step of the device encoding: judged on its "
     "largest error in steps, not its SQNR"},
});

static_assert(in_declaration_order(kFlags), "kFlags lists every Flag once, in declaration order");

constexpr std::string_view flag_name(Flag flag) { return term_name(kFlags, flag); }

// The names of `flags`, in their order: what the JSON, the CSV and the terminal list.
inline std::vector<std::string_view> flag_names(const std::vector<Flag>& flags) {
  std::vector<std::string_view> names;
  names.reserve(flags.size());
  for (Flag flag : flags) names.push_back(flag_name(flag));
  return names;
}

constexpr std::optional<Flag> parse_flag(std::string_view name) { return parse_term(kFlags, name); }

}  // namespace qd::compare
