#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "qnn_debug/compare/metric_fields.h"
#include "views_internal.h"

namespace qd::report {
namespace {

// A spreadsheet runs a cell starting with = + - @ (or a tab / CR) as a formula; names are
// untrusted, so such text gets a leading quote. Numbers are written by us and left alone.
std::string defuse(std::string text) {
  if (!text.empty() && std::string_view("=+-@\t\r").find(text[0]) != std::string_view::npos) {
    text.insert(text.begin(), '\'');
  }
  return text;
}

std::string quoted(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string text_field(std::string_view text) { return quoted(defuse(std::string(text))); }

// Numbers we format ourselves are safe as they are; non-finite ones are "inf", "-inf", "nan"
// as in the JSON.
std::string number_field(std::optional<double> value) {
  if (!value) return "";
  if (std::isnan(*value)) return "nan";
  if (std::isinf(*value)) return *value > 0 ? "inf" : "-inf";
  return fmt::format("{}", *value);
}

// [1, 3, 4] -> "1x3x4"
std::string dims_field(const std::vector<uint64_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

// "0;2;5": where in the reference the figure's element is.
std::string located_field(const compare::Metrics& m, const compare::MetricField& field,
                          const std::vector<uint64_t>& dims) {
  return text_field(fmt::format("{}", fmt::join(coordinates(m.*field.located_at, dims), ";")));
}

// Which optional columns a report has: the error parts (--sim, --isolated) and the profile
// (a device store with profile events).
struct Extras {
  bool parts = false;
  bool time = false;
  // With several devices, their labels: a first column names each row's device, so the file is
  // the ops x devices matrix in long form.
  std::vector<std::string> devices;
};

// What the encoding allows the group and its own excess (compare/excess.h); empty without one.
void add_excess_fields(const std::optional<compare::Excess>& excess,
                       std::vector<std::string>& fields) {
  if (!excess) {
    fields.insert(fields.end(), 4, "");
    return;
  }
  fields.push_back(number_field(excess->allowed_sqnr_db));
  fields.push_back(number_field(excess->excess_db));
  fields.push_back(number_field(excess->excess_noise_ratio));
  fields.push_back(std::string(compare::excess_source_name(excess->source)));
}

// Where the group departs from its earlier runs (compare/departure.h): in that run's rows only.
void add_departure_fields(const std::optional<compare::Departure>& departure,
                          std::vector<std::string>& fields) {
  if (!departure) {
    fields.insert(fields.end(), 3, "");
    return;
  }
  fields.push_back(number_field(departure->baseline_db));
  fields.push_back(number_field(departure->sqnr_db));
  fields.push_back(std::to_string(departure->baseline_runs));
}

// The columns before the metrics, then each metric_fields() entry with in_csv (a located figure
// followed by its coordinates), then the group's findings, then the extras.
std::vector<std::string> header(Extras extras) {
  std::vector<std::string> columns = {
      "device_run",      "reference_run",  "order",          "group",        "verdict",
      "op_type",         "reference_name", "device_name",    "output_index", "match",
      "reference_dtype", "device_dtype",   "reference_dims", "device_dims",  "layout_inferred"};
  for (const compare::MetricField& field : compare::metric_fields()) {
    if (!field.in_csv) continue;
    columns.push_back(field.key);
    if (field.located_at) columns.push_back(std::string(field.key) + "_coordinates");
  }
  for (const char* column : {"introduced_db", "allowed_sqnr_db", "excess_db", "excess_noise_ratio",
                             "excess_source", "departure_baseline_db", "departure_sqnr_db",
                             "departure_baseline_runs", "flags", "hints", "why", "error"}) {
    columns.push_back(column);
  }
  if (!extras.devices.empty()) columns.insert(columns.begin(), "device");
  if (extras.parts) {
    for (const char* column : {"quantization_sqnr_db", "kernel_sqnr_db", "kernel_lsb_max",
                               "isolated_sqnr_db", "attribution", "attribution_margin_db"}) {
      columns.push_back(column);
    }
  }
  if (extras.time) {
    for (const char* column : {"time", "time_unit", "time_share"}) columns.push_back(column);
  }
  return columns;
}

// The group's error parts (--sim, --isolated; columns only in such a report): empty fields for a
// group the parts did not reach.
void add_part_fields(const GroupReport& group, std::vector<std::string>& fields) {
  const auto sqnr = [&](const std::optional<PartFigures> ErrorParts::*part) {
    return group.parts && (*group.parts).*part ? ((*group.parts).*part)->sqnr_db : std::nullopt;
  };
  fields.push_back(number_field(sqnr(&ErrorParts::quantization)));
  fields.push_back(number_field(sqnr(&ErrorParts::kernel)));
  fields.push_back(number_field(group.parts && group.parts->kernel ? group.parts->kernel->lsb_max
                                                                   : std::nullopt));
  fields.push_back(number_field(sqnr(&ErrorParts::isolated)));
  const auto& attribution = group.parts ? group.parts->attribution : std::nullopt;
  fields.push_back(attribution ? text_field(compare::attribution_name(attribution->kind)) : "");
  fields.push_back(
      number_field(attribution ? std::optional(attribution->margin_db) : std::nullopt));
}

// The group's profile time (a report whose device has profile events): empty fields for a
// group no event joined.
void add_time_fields(const GroupReport& group, std::vector<std::string>& fields) {
  const auto& time = group.time;
  fields.push_back(number_field(time ? std::optional(time->duration) : std::nullopt));
  fields.push_back(time ? text_field(time->unit) : "");
  fields.push_back(number_field(time ? std::optional(time->share) : std::nullopt));
}

std::string row(const RunReport& run, const GroupReport& group, const PairReport& pair,
                Extras extras) {
  std::vector<std::string> fields = {std::to_string(run.device_run),
                                     std::to_string(run.reference_run),
                                     std::to_string(group.order),
                                     text_field(group.id),
                                     text_field(compare::verdict_name(group.verdict)),
                                     text_field(group.op_type),
                                     text_field(pair.reference.name),
                                     text_field(pair.device.name),
                                     std::to_string(pair.output_index),
                                     text_field(pair.match),
                                     text_field(pair.reference.dtype),
                                     text_field(pair.device.dtype),
                                     dims_field(pair.reference.dims),
                                     dims_field(pair.device.dims),
                                     pair.layout && pair.layout->inferred ? "true" : "false"};
  for (const compare::MetricField& field : compare::metric_fields()) {
    if (!field.in_csv) continue;
    if (!pair.metrics) {
      fields.push_back("");
    } else if (field.kind == compare::MetricField::Kind::kCount) {
      fields.push_back(std::to_string((*pair.metrics).*field.count));
    } else {
      fields.push_back(number_field(field.value(*pair.metrics)));
    }
    if (field.located_at) {
      fields.push_back(pair.metrics ? located_field(*pair.metrics, field, pair.reference.dims)
                                    : "");
    }
  }
  fields.push_back(number_field(group.introduced_db));
  add_excess_fields(group.excess, fields);
  add_departure_fields(group.departure, fields);
  fields.push_back(text_field(fmt::format("{}", fmt::join(compare::flag_names(group.flags), ";"))));
  std::vector<std::string_view> kinds;
  for (const compare::Hint& hint : group.hints)
    kinds.push_back(compare::hint_kind_name(hint.kind()));
  fields.push_back(text_field(fmt::format("{}", fmt::join(kinds, ";"))));
  fields.push_back(group.hints.empty() ? "" : text_field(group.hints.front().sentence));
  fields.push_back(pair.error.empty() ? "" : text_field(pair.error));
  if (!extras.devices.empty())
    fields.insert(fields.begin(), text_field(extras.devices.at(run.device)));
  if (extras.parts) add_part_fields(group, fields);
  if (extras.time) add_time_fields(group, fields);
  return fmt::format("{}\r\n", fmt::join(fields, ","));
}

class CsvView : public ReportSink {
 public:
  explicit CsvView(TextOut out) : out_(std::move(out)) {}
  Status begin(const ReportHeader& report) override {
    extras_.parts = report.simulation || report.isolated;
    for (const StoreSummary& device : report.devices) {
      extras_.time = extras_.time || !device.profile_events.empty();
      if (report.devices.size() > 1) extras_.devices.push_back(device.label);
    }
    return out_(fmt::format("{}\r\n", fmt::join(header(extras_), ",")));
  }
  Status add_run(const RunReport& run) override {
    std::string text;
    for (const GroupReport& group : run.groups) {
      for (const PairReport& pair : group.pairs) text += row(run, group, pair, extras_);
    }
    return out_(text);
  }

 private:
  TextOut out_;
  Extras extras_;
};

}  // namespace

std::unique_ptr<ReportSink> make_csv_view(TextOut out) {
  return std::make_unique<CsvView>(std::move(out));
}

}  // namespace qd::report
