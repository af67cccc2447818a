// The report's one JSON writer (json.h says what it writes), for the JSON view, report_text and
// the HTML page's embedded data.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "json_codec.h"
#include "json_rows.h"
#include "qnn_debug/report/json.h"

namespace qd::report {

// A long decode's report file (more than kDetailedRuns device runs in all) is written on one
// line, and a passing group keeps its figures but not its pairs' element lists (worst, samples,
// error histogram and, but for a KV cache's, the channels: the bulk of a pair's JSON), as a row
// of its run's packed block (codec::GroupDetail::kPacked, json_rows.h); failing, warning and
// departing groups keep everything (docs/reports.md, "JSON").
inline constexpr uint64_t kDetailedRuns = 16;
// And its runs' introducers cut to the first ones (the reader ranks them all again from the
// groups' figures, judge.h): a few hundred a run would weigh some 40 bytes a pair.
inline constexpr size_t kLongDecodeIntroducers = 10;

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
  // A view's choice of how much of each run it keeps, made from the typed run (the HTML page
  // keeps rows only of a large report's groups): `detail` holds the writer's own choice.
  using DetailPlan = std::function<void(const RunReport& run, codec::RunDetail& detail)>;

  JsonWriter(TextOut out, JsonStyle style = {}, DetailPlan plan = nullptr);
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
  DetailPlan plan_;
  size_t items_ = 0;         // in the array being written
  bool shrinking_ = false;   // shrink_long applies to this report
  codec::RowTables tables_;  // the report's templates, across its runs
};

}  // namespace qd::report
