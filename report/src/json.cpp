#include "qnn_debug/report/json.h"

#include "json_writer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "json_codec.h"
#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "report_schema.h"

namespace qd::report {
namespace {

using nlohmann::json;

// `value` as it appears `depth` levels deep: nlohmann's own indentation, shifted.
std::string dump_at(const json& value, int depth, const JsonStyle& style) {
  const std::string text = jsonio::dump(value, {style.indented ? 2 : -1, style.ascii});
  if (!style.indented) return text;
  const std::string shift = "\n" + std::string(2 * depth, ' ');
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    if (c == '\n') {
      out += shift;  // JSON strings hold no raw line breaks, so every one is layout
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

JsonWriter::JsonWriter(TextOut out, JsonStyle style, DetailPlan plan)
    : out_(std::move(out)), style_(style), plan_(std::move(plan)) {}

Status JsonWriter::member(const char* key, const json& value, bool first) {
  return out_(key_text(key, first) + dump_at(value, 1, style_));
}

std::string JsonWriter::key_text(const char* key, bool first) const {
  std::string text = first ? "{" : ",";
  if (style_.indented) text += "\n  ";
  return text + jsonio::dump(json(key)) + (style_.indented ? ": " : ":");
}

// Arrays that grow with the runs are written an element at a time.
Status JsonWriter::open_array(const char* key) {
  items_ = 0;
  return out_(key_text(key, false) + "[");
}

Status JsonWriter::array_item(const json& value) {
  std::string text = items_++ == 0 ? "" : ",";
  if (style_.indented) text += "\n    ";
  return out_(text + dump_at(value, 2, style_));
}

Status JsonWriter::close_array() { return out_(items_ == 0 || !style_.indented ? "]" : "\n  ]"); }

Status JsonWriter::begin(const ReportHeader& h) {
  uint64_t device_runs = 0;
  for (const StoreSummary& device : h.devices) device_runs += device.runs.size();
  shrinking_ = style_.shrink_long && device_runs > kDetailedRuns;
  if (shrinking_) style_.indented = false;
  tables_ = {};
  QD_RETURN_IF_ERROR(member("schema", kReportSchema, /*first=*/true));
  QD_RETURN_IF_ERROR(member("schema_version", kReportSchemaVersion));
  QD_RETURN_IF_ERROR(member("tool_version", h.tool_version));
  QD_RETURN_IF_ERROR(member("metric_definitions", "docs/metrics.md"));
  QD_RETURN_IF_ERROR(member("reference", codec::to_json(h.reference)));
  // "device" is the first device whatever their number, as readers of one-device reports expect.
  QD_RETURN_IF_ERROR(member("device", codec::to_json(h.device())));
  if (h.devices.size() > 1) {
    json devices = json::array();
    for (const StoreSummary& device : h.devices) devices.push_back(codec::to_json(device));
    QD_RETURN_IF_ERROR(member("devices", devices));
  }
  if (h.simulation) QD_RETURN_IF_ERROR(member("simulation", codec::to_json(*h.simulation)));
  if (h.isolated) QD_RETURN_IF_ERROR(member("isolated", codec::to_json(*h.isolated)));
  json policy;
  jsonio::parse(h.policy.to_json(), policy);  // the policy's own text: always JSON
  QD_RETURN_IF_ERROR(member("policy", policy));
  QD_RETURN_IF_ERROR(member("options", codec::to_json(h.options)));
  return open_array("runs");
}

namespace {

// A group of a long decode: packed when it passes and nothing about it stands out, whole when it
// fails, warns or departs (the groups a reader opens).
codec::GroupDetail long_decode_detail(const GroupReport& group) {
  return group.verdict == compare::Verdict::kPass && !group.departure ? codec::GroupDetail::kPacked
                                                                      : codec::GroupDetail::kFull;
}

}  // namespace

Status JsonWriter::add_run(const RunReport& run) {
  codec::RunDetail detail;
  if (shrinking_) {
    detail.introducers = kLongDecodeIntroducers;
    for (const GroupReport& group : run.groups) {
      detail.group_detail.push_back(long_decode_detail(group));
    }
  }
  if (plan_) plan_(run, detail);
  return array_item(codec::to_json(run, detail, &tables_));
}

Status JsonWriter::finish(const ReportEnding& ending) {
  QD_RETURN_IF_ERROR(close_array());
  QD_RETURN_IF_ERROR(open_array("aggregate"));
  // A long decode's entries leave out per_run: each run's SQNR and verdict of the group are its
  // groups' own, which the reader rebuilds the aggregate from (EndingBuilder).
  for (const AggregateEntry& entry : ending.aggregate) {
    QD_RETURN_IF_ERROR(array_item(codec::to_json(entry, /*with_runs=*/!shrinking_)));
  }
  QD_RETURN_IF_ERROR(close_array());
  QD_RETURN_IF_ERROR(open_array("steps"));
  for (const StepLine& step : ending.steps) QD_RETURN_IF_ERROR(array_item(codec::to_json(step)));
  QD_RETURN_IF_ERROR(close_array());
  if (!ending.devices.empty()) {
    json devices = json::array();
    for (const DeviceOutcome& outcome : ending.devices) devices.push_back(codec::to_json(outcome));
    QD_RETURN_IF_ERROR(member("device_outcomes", devices));
    QD_RETURN_IF_ERROR(open_array("device_matrix"));
    for (const DeviceRow& row : ending.device_matrix) {
      QD_RETURN_IF_ERROR(array_item(codec::to_json(row)));
    }
    QD_RETURN_IF_ERROR(close_array());
  }
  if (!ending.kv_cache.empty()) {
    json tracks = json::array();
    for (const KvCacheTrack& track : ending.kv_cache) tracks.push_back(codec::to_json(track));
    QD_RETURN_IF_ERROR(member("kv_cache", tracks));
  }
  QD_RETURN_IF_ERROR(member("summary", codec::to_json(ending.summary)));
  QD_RETURN_IF_ERROR(member("warnings", ending.warnings));
  // A file ends its last line; the page's data element takes the object alone.
  return out_(style_.indented ? "\n}\n" : shrinking_ ? "}\n" : "}");
}

std::string report_text(const Report& report) {
  std::string text;
  JsonWriter writer(
      [&](std::string_view part) {
        text += part;
        return Status::ok();
      },
      kReportFileStyle);
  const Status written = replay(report, writer);  // appending to a string cannot fail
  (void)written;
  return text;
}

namespace {

template <typename T>
json array_of(const std::vector<T>& items) {
  json out = json::array();
  for (const T& item : items) out.push_back(codec::to_json(item));
  return out;
}

json section_json(const Report& report, ReportSection section) {
  const RunReport* first = report.runs.empty() ? nullptr : &report.runs.front();
  switch (section) {
    case ReportSection::kSummary:
      return codec::to_json(report.ending.summary);
    case ReportSection::kRuns:
      return array_of(report.runs);
    case ReportSection::kFirstRunGroups:
      return first ? array_of(first->groups) : json::array();
    case ReportSection::kFirstDivergence:
      if (first == nullptr) return nullptr;
      for (const GroupReport& group : first->groups) {  // not a copy of the groups
        if (group.id == first->first_divergence) return codec::to_json(group);
      }
      return nullptr;
    case ReportSection::kSteps:
      return array_of(report.ending.steps);
    case ReportSection::kDeviceMatrix: {
      std::vector<DeviceRow> rows = report.ending.device_matrix;
      const auto key = [](const DeviceRow& row) {  // NaN sorts last
        return std::isnan(row.disagreement_db) ? -std::numeric_limits<double>::infinity()
                                               : row.disagreement_db;
      };
      std::stable_sort(rows.begin(), rows.end(),
                       [&](const DeviceRow& a, const DeviceRow& b) { return key(a) > key(b); });
      return array_of(rows);
    }
    case ReportSection::kAggregate:
      return array_of(report.ending.aggregate);
    case ReportSection::kKvCache:
      return array_of(report.ending.kv_cache);
  }
  return nullptr;
}

}  // namespace

std::string section_text(const Report& report, ReportSection section) {
  return jsonio::dump(section_json(report, section));
}

Result<Report> parse_report(std::string_view text, const std::string& source) {
  if (text.starts_with("\x89HDF\r\n\x1a\n")) {
    return error(ErrorCode::kInvalidArgument,
                 source +
                     ": is a qnn-debug store (HDF5), not a report: compare two stores with "
                     "`qnn-debug diff REF DEV --json report.json`, then check that report");
  }
  QD_RETURN_IF_ERROR(check_json_depth(text, source));
  json doc;
  if (!jsonio::parse(text, doc)) {
    return error(ErrorCode::kInvalidArgument, source + ": not valid JSON (truncated or damaged?)");
  }
  QD_RETURN_IF_ERROR(codec::validate_report(doc, source));
  try {
    return codec::report_from(doc, source);
  } catch (const json::exception& e) {  // a value the schema lets through and a field cannot hold
    return error(ErrorCode::kInvalidArgument,
                 source + ": not a valid report: " + std::string(e.what()));
  }
}

Result<Report> load_report(const std::string& path) {
  constexpr uint64_t kMaxReportBytes = uint64_t{8} << 30;  // nlohmann's parse holds it whole
  QD_ASSIGN_OR_RETURN(const std::string text,
                      read_text_file(path, "report", "a report", kMaxReportBytes));
  return parse_report(text, path);
}

}  // namespace qd::report
