// Views of a report document (document.h): terminal summary, CSV and the self-contained HTML page.
#pragma once

#include <cstddef>
#include <string>

#include "qnn_debug/report/document.h"

namespace qd::report {

// Stores, counts, the first divergence, the worst `worst_n` groups by SQNR, warnings and the
// verdict. ANSI colour only when `color` (callers pass isatty).
std::string render_summary(const Document& doc, size_t worst_n, bool color);

// One row per compared pair (RFC 4180: fields with commas, quotes or line breaks are quoted).
// Fields that a spreadsheet would run as a formula are prefixed with ' (names are untrusted).
std::string render_csv(const Document& doc);

// One HTML file with its styles, script and data inlined: no network access. Store strings are
// data, never markup: the page builds its DOM with textContent only.
std::string render_html(const Document& doc);

}  // namespace qd::report
