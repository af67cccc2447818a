// Each report type to JSON and back, side by side so the two directions cannot drift apart
// (docs/report-schema.json). The readers expect a document that validate_report accepted.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "qnn_debug/report/model.h"

namespace qd::report::codec {

struct RowTables;  // json_rows.h

using nlohmann::json;

// A report number: JSON numbers, and the strings "inf", "-inf", "nan" for non-finite values.
double real(const json& value);
json json_real(double value);
// Every floating-point number in `value` cut to 5 significant digits (a page's rows show 2 or 3).
json short_numbers(const json& value);
void shorten_numbers(json& value);  // the same, in place

// How much of a group its JSON keeps: a view's choice, made from the typed group.
enum class GroupDetail : uint8_t {
  kFull,     // everything (the report file)
  kFigures,  // the figures without a pair's element lists: worst, error histogram, samples and,
             // but for a KV cache's, channels
  kRow,      // a large page's row: the overview figures and the first hint, 5 digits
  // A long decode's passing group in the report file: kFigures as a row of its run's packed block
  // (json_rows.h), every figure exact; kFigures where the run is written without RowTables.
  kPacked,
};

// How much of a run its JSON keeps. Without groups ("groups_in_page": false), a run keeps its
// own fields cut to 5 digits and its first `introducers` introducers, and with `cells` each
// group's light row as a cell (json_rows.h, CellWriter).
struct RunDetail {
  bool groups = true;
  bool cells = false;
  size_t introducers = SIZE_MAX;
  std::vector<GroupDetail> group_detail;  // by group; a group past its end: kFull
};

json to_json(const TensorSummary& tensor);
json to_json(const Quantization& quant);  // null when not quantized
json to_json(const std::vector<EncodingFinding>& problems);
json to_json(const compare::Metrics& metrics, const std::vector<uint64_t>& reference_dims);
json to_json(const GroupReport& group, GroupDetail detail = GroupDetail::kFull);
// `tables`: the writer's, across the report's runs (packed groups and cells need them).
json to_json(const RunReport& run, const RunDetail& detail = {}, RowTables* tables = nullptr);
json to_json(const StoreSummary& store);
json to_json(const ReportOptions& options);
// Without `per_run` (the page writes an entry's runs in a form of its own).
json to_json(const AggregateEntry& entry, bool with_runs = true);
json to_json(const Summary& summary);
json to_json(const StepLine& step);
json to_json(const DeviceOutcome& outcome);
json to_json(const DeviceRow& row);
json to_json(const KvCacheTrack& track);

TensorSummary tensor_from(const json& j);
GroupReport group_from(const json& j);
RunReport run_from(const json& j);  // its packed groups aside (json_rows.h, PackedReader)
StoreSummary store_from(const json& j);
ReportOptions options_from(const json& j);

// A parsed document checked against docs/report-schema.json (errors name `source`), and the
// report it holds: the summary and aggregate rebuilt from its runs (EndingBuilder).
Status validate_report(const json& doc, const std::string& source);
Result<Report> report_from(const json& doc, const std::string& source);

}  // namespace qd::report::codec
