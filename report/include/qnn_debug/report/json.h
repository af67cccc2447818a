// The report as JSON (docs/report-schema.json): one writer, which streams, and one reader, for
// `qnn-debug report`, `check` and the Python package. Reports of schema version 1 load as well.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

// Where written text goes; an error stops the writer.
using TextOut = std::function<Status(std::string_view text)>;

// The report file's text (what `qnn-debug diff --json` writes).
std::string report_text(const Report& report);

// One part of the typed report as JSON text, in the report file's form of it (every group in
// full): what Python's Report gives as .summary, .runs, .groups, .steps, ... without reading the
// whole document back.
enum class ReportSection : uint8_t {
  kSummary,          // the summary object
  kRuns,             // every run pair
  kFirstRunGroups,   // the first run pair's groups ([] without runs)
  kFirstDivergence,  // the first run pair's first diverging group, or null
  kSteps,            // the step lines
  kDeviceMatrix,     // the ops x devices rows, most disagreement first (NaN last)
  kAggregate,        // each group across runs
  kKvCache,          // the KV-cache tracks ([] when no tensor is a cache)
};
std::string section_text(const Report& report, ReportSection section);

// Reads and validates a saved report. Nesting deeper than kMaxJsonDepth
// (qnn_debug/base/json_depth.h) is refused before parsing; not JSON, another schema or a newer
// version is an error naming the file; so is any field that does not fit docs/report-schema.json
// (embedded at build time), with its path: "report.json: not a valid report:
// runs[0].groups[3].sqnr_db: expected a number, ...". The summary and aggregate are rebuilt from
// the runs (EndingBuilder), so they cannot disagree with them.
Result<Report> load_report(const std::string& path);
// The same from the report's text; `source` names it in errors.
Result<Report> parse_report(std::string_view text, const std::string& source);

}  // namespace qd::report
