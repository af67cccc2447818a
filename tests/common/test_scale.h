// QD_TEST_SCALE: the share, in (0, 1], of a repetition-heavy test's repetitions that run; unset,
// all of them. scripts/sanitize.sh sets it: the sanitizers need every code path, not every
// repetition of it, and under them each repetition costs several times as much
// (docs/reliability.md, "CI time"). A test that reads it keeps every path at any scale and says
// in its comment which repetitions it leaves out.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <string>

namespace qd::testing {

// QD_TEST_SCALE, or 1 when it is unset; an unparsable or out-of-range value is reported once on
// stderr and counts as 1, so a typo never makes a test silently test less.
inline double test_scale() {
  static const double scale = [] {
    const char* text = std::getenv("QD_TEST_SCALE");
    if (text == nullptr || *text == '\0') return 1.0;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(value > 0.0 && value <= 1.0)) {
      std::cerr << "QD_TEST_SCALE=" << text << ": not a number in (0, 1]; running everything\n";
      return 1.0;
    }
    return value;
  }();
  return scale;
}

// One repetition in this many runs: 1 / QD_TEST_SCALE, rounded (1 when unset).
inline size_t repetition_stride() {
  return static_cast<size_t>(std::max(1.0, std::round(1.0 / test_scale())));
}

}  // namespace qd::testing
