// A decoded value as two floats, the form the metrics' float pass reads every side in that is not
// stored as float32 (docs/metrics.md, section 4): `hi` is the value rounded to float (or, when the
// decoder computes it in floats, a neighbour of that) and `lo` about what is left, so hi + lo
// holds the value to about 2^-47 of it, and a difference of two such values is computed in float
// lanes without rounding either value first.
#pragma once

#include <cmath>
#include <limits>

namespace qd::compare {

struct Split {
  float hi = 0;
  float lo = 0;

  // The value (exact: hi + lo fits a double).
  explicit operator double() const { return double(hi) + double(lo); }

  // Any double: beyond the float range it is +-inf (hi) with lo = 0, as the metrics count it,
  // and NaN stays NaN.
  static Split of(double v) {
    const auto hi = static_cast<float>(v);
    if (!std::isfinite(hi)) return {hi, 0.0f};
    return {hi, static_cast<float>(v - double(hi))};
  }
};

}  // namespace qd::compare
