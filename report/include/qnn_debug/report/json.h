// The report as JSON (docs/report-schema.json): one writer, which streams, and one reader, for
// `qnn-debug report`, `check` and the Python package. Reports of schema version 1 load as well.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

// Where written text goes; an error stops the writer.
using TextOut = std::function<Status(std::string_view text)>;

// A long decode's report file (more than kDetailedRuns device runs in all) is written on one
// line, and a passing group's pairs beyond its device's first run keep their figures but not
// their element lists (worst, samples, error histogram: the bulk of a pair's JSON); failing and
// warning groups, and every device's first run, keep everything (docs/reports.md, "JSON").
inline constexpr uint64_t kDetailedRuns = 16;

struct JsonStyle {
  bool indented = true;      // two spaces per level, as the report file; false: one line
  bool ascii = false;        // \u escapes for every non-ASCII character
  bool shrink_long = false;  // the report file's kDetailedRuns rule (above)
};
// The report file's style: `qnn-debug diff --json`, report_text, the Python Report.
inline constexpr JsonStyle kReportFileStyle{true, false, true};

// Writes the report as it arrives: the header at begin, each run at add_run, the aggregate,
// summary and warnings at finish. Invalid UTF-8 in store strings is replaced (U+FFFD).
class JsonWriter : public ReportSink {
 public:
  // Rewrites a run's JSON before it is written: a view may write runs in its own shape (the
  // HTML page writes the groups of a large report without their full figures).
  using RunShaper = std::function<void(nlohmann::json& run)>;

  JsonWriter(TextOut out, JsonStyle style = {}, RunShaper shape_run = nullptr);
  Status begin(const ReportHeader& header) override;
  Status add_run(const RunReport& run) override;
  Status finish(const ReportEnding& ending) override;

 private:
  std::string key_text(const char* key, bool first) const;
  Status member(const char* key, const nlohmann::json& value, bool first = false);
  Status open_array(const char* key);
  Status array_item(const nlohmann::json& value);
  Status close_array();
  TextOut out_;
  JsonStyle style_;
  RunShaper shape_run_;
  size_t items_ = 0;                  // in the array being written
  bool shrinking_ = false;            // shrink_long applies to this report
  std::vector<bool> device_has_run_;  // by device: its first run was written
};

// The report file's text (what `qnn-debug diff --json` writes).
std::string report_text(const Report& report);

// Reads and validates a saved report. Nesting deeper than kMaxJsonDepth
// (qnn_debug/base/json_depth.h) is refused before parsing; not JSON, another schema or a newer
// version is an error naming the file; so is any field that does not fit docs/report-schema.json
// (embedded at build time), with its path: "report.json: not a valid report:
// runs[0].groups[3].sqnr_db: expected a number, ...". The summary and aggregate are rebuilt from
// the runs (EndingBuilder), so they cannot disagree with them.
Result<Report> load_report(const std::string& path);
// The same from the report's text; `source` names it in errors.
Result<Report> parse_report(std::string_view text, const std::string& source);

// A report number: JSON numbers, and the strings "inf", "-inf", "nan" for non-finite values.
double real(const nlohmann::json& value);
nlohmann::json json_real(double value);

}  // namespace qd::report
