// The HTML report's template, styles and script (report/assets), compiled in by CMake.
#pragma once

namespace qd::report::assets {
extern const char* const
    kTemplate;  // holds the markers /*QD_STYLE*/, /*QD_METRICS*/, /*QD_DATA*/, /*QD_SCRIPT*/
extern const char* const kStyle;
extern const char* const kScript;
}  // namespace qd::report::assets
