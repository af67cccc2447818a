#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "qnn_debug/report/render.h"

namespace qd::report {
namespace {

using nlohmann::json;

constexpr const char* kColumns[] = {"device_run",
                                    "reference_run",
                                    "order",
                                    "group",
                                    "verdict",
                                    "op_type",
                                    "reference_name",
                                    "device_name",
                                    "output_index",
                                    "match",
                                    "reference_dtype",
                                    "device_dtype",
                                    "reference_dims",
                                    "device_dims",
                                    "layout_inferred",
                                    "sqnr_db",
                                    "mse",
                                    "rmse",
                                    "mae",
                                    "max_abs",
                                    "max_abs_coordinates",
                                    "rel_l2",
                                    "cosine",
                                    "allclose_frac",
                                    "lsb_mae",
                                    "lsb_max",
                                    "noise_ratio",
                                    "saturation",
                                    "ref_nan",
                                    "ref_inf",
                                    "dev_nan",
                                    "dev_inf",
                                    "introduced_db",
                                    "flags",
                                    "error"};

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

// Every text cell: defused, then quoted as RFC 4180 asks. A value that is not a string (a
// damaged report) is written as its JSON text, defused and quoted the same way.
std::string text_field(const json& value) {
  return quoted(defuse(value.is_string() ? value.get<std::string>() : value.dump()));
}

// Numbers we format ourselves are safe as they are (non-finite ones are the report's "inf",
// "-inf" and "nan"); anything else is text.
std::string number_field(const json& value) {
  if (value.is_null()) return "";
  if (value.is_number()) return fmt::format("{}", value.get<double>());
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text == "inf" || text == "-inf" || text == "nan") return text;
  }
  return text_field(value);
}

// [1, 3, 4] -> "1x3x4"
std::string dims_field(const json& dims) {
  std::string out;
  for (const json& d : dims) out += (out.empty() ? "" : "x") + std::to_string(d.get<uint64_t>());
  return out;
}

std::string joined(const json& items, const char* separator) {
  std::string out;
  for (const json& item : items) {
    out +=
        (out.empty() ? "" : separator) + (item.is_string() ? item.get<std::string>() : item.dump());
  }
  return out;
}

std::string row(const json& run, const json& group, const json& pair) {
  const json& m = pair["metrics"];
  auto metric = [&](const char* key) { return m.is_object() ? number_field(m[key]) : ""; };
  auto count = [&](const char* key) {
    return m.is_object() ? std::to_string(m[key].get<uint64_t>()) : std::string();
  };
  const std::vector<std::string> fields = {
      std::to_string(run["device_run"].get<int64_t>()),
      std::to_string(run["reference_run"].get<int64_t>()),
      std::to_string(group["order"].get<int64_t>()),
      text_field(group["id"]),
      text_field(group["verdict"]),
      text_field(group["op_type"]),
      text_field(pair["reference"]["name"]),
      text_field(pair["device"]["name"]),
      pair.contains("output_index") ? number_field(pair["output_index"]) : "",
      text_field(pair["match"]),
      text_field(pair["reference"]["dtype"]),
      text_field(pair["device"]["dtype"]),
      dims_field(pair["reference"]["dims"]),
      dims_field(pair["device"]["dims"]),
      pair["layout"].is_object() && pair["layout"].value("inferred", false) ? "true" : "false",
      metric("sqnr_db"),
      metric("mse"),
      metric("rmse"),
      metric("mae"),
      metric("max_abs"),
      m.is_object() ? quoted(defuse(joined(m["max_abs_coordinates"], ";"))) : "",
      metric("rel_l2"),
      metric("cosine"),
      metric("allclose_frac"),
      metric("lsb_mae"),
      metric("lsb_max"),
      metric("noise_ratio"),
      metric("saturation"),
      count("ref_nan"),
      count("ref_inf"),
      count("dev_nan"),
      count("dev_inf"),
      number_field(group["introduced_db"]),
      quoted(defuse(joined(group["flags"], ";"))),
      pair["error"].is_string() ? text_field(pair["error"]) : ""};
  return fmt::format("{}\r\n", fmt::join(fields, ","));
}

}  // namespace

std::string render_csv(const Document& doc) {
  std::string out = fmt::format("{}\r\n", fmt::join(kColumns, ","));
  for (const json& run : doc["runs"]) {
    for (const json& group : run["groups"]) {
      for (const json& pair : group["pairs"]) out += row(run, group, pair);
    }
  }
  return out;
}

}  // namespace qd::report
