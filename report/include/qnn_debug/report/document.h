// The report document: the JSON of docs/report-schema.json, built by `qnn-debug diff` or loaded
// from a saved file. Every view (terminal, CSV, HTML) renders from it, and `check` re-judges it,
// so a saved report re-renders exactly like the original.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/policy.h"

namespace qd::report {

inline constexpr const char* kReportSchema = "qnn-debug-report";
inline constexpr int kReportSchemaVersion = 1;

using Document = nlohmann::json;

// Reads and validates a saved report. Nesting deeper than kMaxJsonDepth
// (qnn_debug/base/json_depth.h) is refused before parsing; not JSON, another schema or a newer
// version is an error naming the file; so is any field that does not fit docs/report-schema.json
// (embedded at build time), with its path: "report.json: not a valid report:
// runs[0].groups[3].sqnr_db: expected a number, ...". A document that loads can be rendered and
// re-judged without a missing or mistyped field.
Result<Document> load_report(const std::string& path);
// The same from the report's text; `source` names it in errors.
Result<Document> parse_report(std::string_view text, const std::string& source);
Status validate_report(const Document& doc, const std::string& source);

// The file content of a report: indented JSON, invalid UTF-8 in names replaced.
std::string report_text(const Document& doc);

// Recomputes "summary" (counts, first divergence, verdict) from "runs".
void summarize(Document& doc);

// Re-judges every group with `policy` (verdicts, first divergences, summary, the policy block),
// as `qnn-debug diff` would have with that policy.
void rejudge(Document& doc, const compare::Policy& policy);

compare::Verdict report_verdict(const Document& doc);

// A report number: JSON numbers, and the strings "inf", "-inf", "nan" for non-finite values.
double real(const nlohmann::json& value);
nlohmann::json json_real(double value);

}  // namespace qd::report
