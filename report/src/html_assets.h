// The HTML report's template, styles and script (report/assets), compiled in by CMake.
#pragma once

#include <string>

namespace qd::report::assets {
extern const char* const
    kTemplate;  // holds the markers /*QD_STYLE*/, /*QD_METRICS*/, /*QD_DATA*/, /*QD_SCRIPT*/
extern const char* const kStyle;
// The script files joined into one function (kept apart in the binary: a C++ string literal may
// be at most 64 KiB).
const std::string& script();
}  // namespace qd::report::assets
