// Questions tests ask of a report's JSON.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace qd::testing {

// A report number (docs/report-schema.json): a JSON number, or "inf", "-inf", "nan".
inline double real(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (value == "inf") return std::numeric_limits<double>::infinity();
  if (value == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

// Whether one of the report's warnings contains `fragment`.
inline bool has_warning(const nlohmann::json& report, const std::string& fragment) {
  for (const auto& warning : report.at("warnings")) {
    if (warning.get<std::string>().find(fragment) != std::string::npos) return true;
  }
  return false;
}

}  // namespace qd::testing
