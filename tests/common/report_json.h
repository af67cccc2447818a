// Questions tests ask of a report's JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace qd::testing {

// Whether one of the report's warnings contains `fragment`.
inline bool has_warning(const nlohmann::json& report, const std::string& fragment) {
  for (const auto& warning : report.at("warnings")) {
    if (warning.get<std::string>().find(fragment) != std::string::npos) return true;
  }
  return false;
}

}  // namespace qd::testing
