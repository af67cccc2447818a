// The report document: the JSON of docs/report-schema.json, built by `qnn-debug diff` or loaded
// from a saved file. Every view (terminal, CSV, HTML) renders from it, and `check` re-judges it,
// so a saved report re-renders exactly like the original.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "qnn_debug/compare/policy.h"
#include "qnn_debug/status.h"

namespace qd::report {

inline constexpr const char* kReportSchema = "qnn-debug-report";
inline constexpr int kReportSchemaVersion = 1;

using Document = nlohmann::json;

// Reads and validates a saved report: not JSON, another schema, a newer version or a field of
// the wrong type is an error naming the file and the field (e.g. "runs[0].groups[3].sqnr_db").
Result<Document> load_report(const std::string& path);
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
